"""Issue 20, the Datalog engines and rule errors: a broken Soufflé install, child processes on
every exit path, and the rule-text checks of `ave rules lint`.

FAULT INJECTION. No Soufflé is mocked here: the engine's results are never faked. The `souffle`
executables written by `_broken_souffle` stand in for a *broken install* (one that writes invalid
UTF-8, malformed CSV, or hangs), and each test checks that ave survives that breakage: a one-line
error with its documented exit code, a JSON report with `--json`, no `ave-souffle-*` directory
and no process left behind. They answer `--version` like a 32-bit Soufflé, so that the engine
gets as far as a real run. The real engine is tested on a live Soufflé in test_souffle_engine.py
and test_engine_differential.py.

Time bounds here are only there so that a regression fails instead of hanging: each is at least
ten times what a correct run needs on a loaded machine.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from ave_decl.datalog import souffle_engine
from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
from ave_decl.datalog.ruleset import load_rules, rule_metadata
from ave_decl.lang.errors import EngineTimeout, EngineUnavailable, RuleError

KERNEL = EXAMPLES / "gemm_naive.ave"
HANG_S = 1000  # how long a hanging fake sleeps: far beyond every bound below
GONE_WITHIN_S = 60.0  # a killed process is reaped long before this
linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process state from /proc")

_VERSION = """if [ "$1" = "--version" ]; then
    echo "Souffle: 2.5 (fault injection: a broken install, see tests/test_hardening_engines.py)"
    echo "Word size: 32 bits"
    exit 0
fi
out=""
while [ $# -gt 0 ]; do
    if [ "$1" = "-D" ]; then out="$2"; fi
    shift
done
"""


def _broken_souffle(tmp_path: Path, body: str) -> Path:
    """A `souffle` that answers --version like a 32-bit build and then runs `body` (sh)."""
    exe = tmp_path / "bin" / "souffle"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\n# FAULT INJECTION: a broken Soufflé install (tests/test_hardening_engines.py)\n"
                   + _VERSION + body + "\n")
    exe.chmod(0o755)
    return exe


def _hang(tmp_path: Path, grandchild: bool = True) -> tuple[Path, Path]:
    """A souffle that hangs; it writes 'leader [grandchild]' pids to the returned file first."""
    pids = tmp_path / "pids"
    if grandchild:  # the sleep is a grandchild of ave: only killing the process group reaches it
        body = f'sleep {HANG_S} &\necho "$$ $!" > "{pids}.tmp"\nmv "{pids}.tmp" "{pids}"\nwait'
    else:
        body = f'echo "$$" > "{pids}.tmp"\nmv "{pids}.tmp" "{pids}"\nexec sleep {HANG_S}'
    return _broken_souffle(tmp_path, body), pids


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """The engine's temporary directories go here, so leftovers are ours alone to count."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("ave-souffle-*"))


def _small_prog(tmp_path: Path):
    f = tmp_path / "p.dl"
    f.write_text(".decl p(x:number, y:symbol)\n.output p\np(1, \"a\").\n")
    prog = load_program([f])
    lint(prog)
    return prog


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _group_alive(pgid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            st = _stat(int(p.name))
            if st is not None and st[0] not in ("Z", "X") and int(st[2]) == pgid:
                out.append(int(p.name))
    return out


def _wait_for(predicate, within: float = GONE_WITHIN_S) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _read_pids(pids: Path) -> list[int]:
    assert _wait_for(pids.exists, 120), "the fake souffle never started"
    return [int(x) for x in pids.read_text().split()]


def _cleanup(pids: Path) -> None:
    """If a test failed, do not leave its hanging fake behind."""
    if pids.exists():
        for pid in (int(x) for x in pids.read_text().split()):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _one_line(text: str) -> str:
    """The one error line of a command's output (a text report adds its summary line)."""
    lines = [ln for ln in text.splitlines() if "error:" in ln]
    assert len(lines) == 1, text
    assert "Traceback" not in text and "internal error" not in text
    return lines[0]


# ------------------------------------------------------------------ invalid UTF-8, malformed output
def test_invalid_utf8_on_stderr_is_a_rule_error(tmp_path, private_tmp):
    exe = _broken_souffle(tmp_path, r"printf 'Error: broken \377\376 bytes\n' >&2; exit 1")
    with pytest.raises(RuleError) as info:
        souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe)).run({})
    assert "\n" not in info.value.message and "broken" in info.value.message
    assert _leftovers(private_tmp) == []


def test_invalid_utf8_in_version_output_is_survived(tmp_path, private_tmp):
    exe = tmp_path / "souffle"
    exe.write_text("#!/bin/sh\n# FAULT INJECTION: a broken install\nprintf 'Souffle \\377\\nWord size: 32 bits\\n'\n"
                   "out=\"\"\nwhile [ $# -gt 0 ]; do if [ \"$1\" = \"-D\" ]; then out=\"$2\"; fi; shift; done\n"
                   "printf '1\\ta\\n' > \"$out/p.csv\"\n")
    exe.chmod(0o755)
    assert souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe)).run({}) == {"p": [(1, "a")]}


def test_binary_that_cannot_execute_is_unavailable(tmp_path):
    exe = tmp_path / "souffle"
    exe.write_bytes(b"\x7fELF garbage, not a program")  # FAULT INJECTION: a corrupt binary
    exe.chmod(0o755)
    with pytest.raises(EngineUnavailable) as info:
        souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe))
    assert "\n" not in info.value.message


@pytest.mark.parametrize("csv, why", [
    (r"x\ta\n", "is not a 32-bit number"),
    (r"1\n", "1 cells for 2 attributes"),
    (r"1\ta\textra\n", "3 cells for 2 attributes"),
    (r"99999999999\ta\n", "is not a 32-bit number"),
    (r"\377\376\ta\n", "is not a 32-bit number"),
])
def test_malformed_csv_is_a_broken_install(tmp_path, private_tmp, csv, why):
    exe = _broken_souffle(tmp_path, f"printf '{csv}' > \"$out/p.csv\"")
    with pytest.raises(EngineUnavailable) as info:
        souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe)).run({})
    assert why in info.value.message and "p.csv" in info.value.message and "\n" not in info.value.message
    assert _leftovers(private_tmp) == []


def test_missing_output_is_a_broken_install(tmp_path, private_tmp):
    exe = _broken_souffle(tmp_path, "exit 0")
    with pytest.raises(EngineUnavailable, match="wrote no output for p"):
        souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe)).run({})
    assert _leftovers(private_tmp) == []


def _garbage_for_every_output(tmp_path: Path) -> Path:
    rels = " ".join(sorted(load_rules().outputs))
    return _broken_souffle(tmp_path, f"for r in {rels}; do printf 'not\\377a\\trow\\n' > \"$out/$r.csv\"; done\n"
                                     r"printf 'warning \377\n' >&2")


@pytest.mark.parametrize("fault, code, fragment", [
    ("stderr", 4, "souffle failed with exit code 1"),
    ("csv", 2, "malformed line 1"),
])
def test_broken_souffle_cli(tmp_path, private_tmp, monkeypatch, ave, fault, code, fragment):
    exe = (_broken_souffle(tmp_path, r"printf 'Error: \377\376\n' >&2; exit 1") if fault == "stderr"
           else _garbage_for_every_output(tmp_path))
    monkeypatch.setenv("AVE_SOUFFLE", str(exe))
    r = ave("check", "--engine", "souffle", KERNEL)
    assert r.code == code
    assert fragment in _one_line(r.out + r.err)
    r = ave("check", "--engine", "souffle", "--json", KERNEL)
    assert r.code == code
    report = r.json()  # a report, not an empty stdout
    assert [e["exit_code"] for e in report["errors"]] == [code]
    assert fragment in report["errors"][0]["message"] and "\n" not in report["errors"][0]["message"]
    assert _leftovers(private_tmp) == []


# ------------------------------------------------------------------ a hanging Soufflé
@linux_only
def test_timeout_kills_the_process_group_and_cleans_up(tmp_path, private_tmp):
    exe, pids = _hang(tmp_path)
    started = time.monotonic()
    try:
        with pytest.raises(EngineTimeout):
            souffle_engine.SouffleEngine(_small_prog(tmp_path), binary=str(exe)).run({}, timeout=1.0)
        assert time.monotonic() - started < HANG_S / 10
        leader, grandchild = _read_pids(pids)
        assert _wait_for(lambda: not _group_alive(leader)), _group_alive(leader)
        assert not _alive(grandchild)
        assert _leftovers(private_tmp) == []
    finally:
        _cleanup(pids)


@linux_only
def test_default_bound_without_engine_timeout(tmp_path, private_tmp, monkeypatch, ave):
    """No --engine-timeout: the engine's DEFAULT_TIMEOUT_S applies (shortened here, the value is
    documented in docs/engines.md); the run is UNKNOWN (exit 5) with a JSON report."""
    exe, pids = _hang(tmp_path)
    monkeypatch.setenv("AVE_SOUFFLE", str(exe))
    monkeypatch.setattr(souffle_engine, "DEFAULT_TIMEOUT_S", 1.0)
    try:
        r = ave("check", "--engine", "souffle", "--json", KERNEL)
        assert r.code == 5
        report = r.json()
        assert [k["verdict"] for k in report["kernels"]] == ["UNKNOWN"]
        assert "did not finish within 1 s" in report["errors"][0]["message"]
        leader, grandchild = _read_pids(pids)
        assert _wait_for(lambda: not _group_alive(leader) and not _alive(grandchild))
        assert _leftovers(private_tmp) == []
    finally:
        _cleanup(pids)


def test_default_bound_is_finite():
    assert 0 < souffle_engine.DEFAULT_TIMEOUT_S < float("inf")
    assert f"{souffle_engine.DEFAULT_TIMEOUT_S:g} s" in (ROOT / "docs" / "engines.md").read_text()


def _sigint_as_on_a_terminal() -> None:
    """Run in the child before exec: a test run started in the background by a non-interactive
    shell (`make test &`, some CI runners) ignores SIGINT, the child would inherit that, and
    Python installs no KeyboardInterrupt handler for an ignored SIGINT: Ctrl-C must be testable."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ave_process(tmp_path: Path, exe: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, AVE_SOUFFLE=str(exe), TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "ave_decl.cli", "check", "--engine", "souffle", *args,
                             str(KERNEL)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, cwd=ROOT, preexec_fn=_sigint_as_on_a_terminal)
    return proc, tmp


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_ave_kills_souffle_and_cleans_up(tmp_path, sig):
    exe, pids = _hang(tmp_path)
    proc, tmp = _ave_process(tmp_path, exe)
    try:
        leader, grandchild = _read_pids(pids)
        assert _leftovers(tmp)  # the run is under way
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=GONE_WITHIN_S)
        if sig == signal.SIGTERM:
            assert proc.returncode == -signal.SIGTERM  # ended the way it was asked to, after cleaning up
        else:
            assert proc.returncode not in (0, 70) and b"Traceback" not in err
        assert _wait_for(lambda: not _group_alive(leader) and not _alive(grandchild))
        assert _leftovers(tmp) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _cleanup(pids)


@linux_only
def test_sigkill_of_ave_still_ends_souffle(tmp_path):
    """SIGKILL cannot be caught: the child asked the kernel to die with its parent (its temporary
    directory is left, which nothing can prevent)."""
    exe, pids = _hang(tmp_path, grandchild=False)
    proc, _tmp = _ave_process(tmp_path, exe)
    try:
        (leader,) = _read_pids(pids)
        proc.kill()
        proc.wait()
        assert _wait_for(lambda: not _alive(leader))
    finally:
        _cleanup(pids)


# ------------------------------------------------------------------ the embedded engine's worker
_WORKER = """
import sys, pathlib
from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
f = pathlib.Path(sys.argv[1])
f.write_text(".decl n(x:number)\\nn(0).\\nn(x + 1) :- n(x), x < 2000000000.\\n.output n\\n")
prog = load_program([f]); lint(prog)
print("ready", flush=True)
ClingoEngine(prog).run({}, timeout=%d)
""" % HANG_S


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            st = _stat(int(p.name))
            if st is not None and int(st[1]) == pid and st[0] not in ("Z", "X"):
                out.append(int(p.name))
    return out


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_worker_never_outlives_ave(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path / "slow.dl")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, cwd=ROOT,
                            preexec_fn=_sigint_as_on_a_terminal)
    workers: list[int] = []
    try:
        assert proc.stdout.readline() == b"ready\n"
        assert _wait_for(lambda: bool(_children(proc.pid)), 120), "no worker was started"
        workers = _children(proc.pid)
        proc.send_signal(sig)
        proc.communicate(timeout=GONE_WITHIN_S)
        if sig == signal.SIGTERM:
            assert proc.returncode == -signal.SIGTERM
        assert _wait_for(lambda: not any(_alive(w) for w in workers))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for w in workers:
            try:
                os.kill(w, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_worker_result_and_timeout_leave_no_process(tmp_path):
    f = tmp_path / "p.dl"
    f.write_text(".decl n(x:number)\nn(0).\nn(x + 1) :- n(x), x < 3.\n.output n\n")
    prog = load_program([f])
    lint(prog)
    before = set(_children(os.getpid())) if Path("/proc").exists() else set()
    assert ClingoEngine(prog).run({}, timeout=HANG_S)["n"] == [(0,), (1,), (2,), (3,)]
    if Path("/proc").exists():
        assert _wait_for(lambda: set(_children(os.getpid())) <= before)


# ------------------------------------------------------------------ rule-text checks (ave rules lint)
_HEAD = "// @id user/mine\n// @title Mine\n// @severity error\n"


@pytest.mark.parametrize("body, line, fragment", [
    # a "rel" obligation needs an assert_tag site (the solver asserted it; now the linter says so)
    ('obligation(k, s, "user/mine", "rel", l, r) :- assert_eq(k, s, l, r).\n', 4, "not an assert_tag"),
    ('obligation(k, s, "user/mine", "rel", v, v) :- value(k, v, _, s).\n', 4, "not an assert_tag"),
    ('.decl site(k:Kernel, s:Stmt)\nsite(k, s) :- assert_rel(k, s, _, _, _).\nsite(k, s) :- assert_eq(k, s, _, _).\n'
     'obligation(k, s, "user/mine", "rel", l, r) :- site(k, s), assert_rel(k, t, l, r, _).\n', 7,
     "not an assert_tag"),
    ('obligation(k, s, "user/mine", x, l, r) :- assert_eq(k, s, l, r), x = "rel".\n', 4, "not an assert_tag"),
    # an unknown relation was an UNKNOWN finding, printed as a warning despite @severity error
    ('obligation(k, s, "user/mine", "frobnicate", l, r) :- assert_eq(k, s, l, r).\n', 4,
     "unknown obligation relation 'frobnicate'"),
    # the head's invariant id is what the report looks the title and severity up by
    ('structural(k, s, "user/other", "why") :- barrier(k, s).\n', 4, "its own @id"),
])
def test_rules_lint_rejects_contract_violations(tmp_path, ave, body, line, fragment):
    f = tmp_path / "mine.dl"
    f.write_text(_HEAD + body)
    r = ave("rules", "lint", tmp_path)
    assert r.code == 4
    msg = _one_line(r.out + r.err)
    assert msg.startswith(f"{f}:{line}:1: error:") and fragment in msg
    r = ave("check", "--json", "--rules", tmp_path, KERNEL)  # and check refuses the rule set the same way
    assert r.code == 4 and fragment in r.json()["errors"][0]["message"]


def test_rules_lint_rejects_an_unknown_severity(tmp_path, ave):
    (tmp_path / "mine.dl").write_text("// @id user/mine\n// @severity erorr\n"
                                      'structural(k, s, "user/mine", "why") :- barrier(k, s).\n')
    r = ave("rules", "lint", tmp_path)
    assert r.code == 4 and f"{tmp_path / 'mine.dl'}:2:4: error: @severity 'erorr'" in _one_line(r.out + r.err)


def test_rel_obligations_through_helpers_and_aliases_are_accepted(tmp_path, ave):
    (tmp_path / "mine.dl").write_text(
        _HEAD.replace("error", "warning") +
        ".decl my_site(k:Kernel, s:Stmt, l:Value, r:Value)\n"
        "my_site(k, s, l, r) :- assert_rel(k, s, l, r, _).\n"
        "my_site(k, s, l, r) :- my_site(k, s, l, r), value(k, l, _, _).\n"
        'obligation(k, s, "user/mine", "rel", l, r) :- my_site(k, s, l, r).\n'
        'obligation(k, t, "user/mine", x, l, r) :- assert_rel(k, s, l, r, _), t = s, x = "rel".\n')
    r = ave("rules", "lint", tmp_path)
    assert r.code == 0, r.out + r.err
    r = ave("check", "--json", "--rules", tmp_path, KERNEL)
    mine = [f for f in r.json()["kernels"][0]["findings"] if f["invariant"] == "user/mine"]
    assert mine and {f["severity"] for f in mine} == {"warning"} and {f["verdict"] for f in mine} == {"VERIFIED"}


def test_obligations_header_lists_the_solver_relations():
    """rules/obligations.dl's @relations is the linter's vocabulary: it must be the solver's."""
    from ave_decl.datalog.contract import relation_kinds
    from ave_decl.solver.solve import KNOWN_RELATIONS

    prog = load_rules()
    assert relation_kinds(prog) == KNOWN_RELATIONS
    text = (ROOT / "rules" / "obligations.dl").read_text()
    for rel in KNOWN_RELATIONS:  # each one is described in the header's table too
        assert f"//   {rel} " in text
    declared = {d for d in prog.decls if prog.decls[d].span.path.endswith("obligations.dl")}
    assert declared == {"obligation", "structural", "unchecked"}
    assert "the three relations declared here" in rule_metadata(prog)["ave/obligations"]["description"]


def test_multi_line_header_fields_are_kept_whole():
    """An indented comment line continues the field above (help and descriptions were cut at line 1)."""
    meta = rule_metadata(load_rules())["ave/bank-conflicts"]
    assert meta["help"].endswith("(`layout=swizzle(3, 3, 3) @ ...`).")
    assert "not change the kernel's verdict" in meta["description"]


def test_json_report_of_broken_rules_parses(tmp_path, ave):
    (tmp_path / "mine.dl").write_text(_HEAD + 'obligation(k, s, "user/mine", "rel", l, r) :- assert_eq(k, s, l, r).\n')
    r = ave("check", "--json", "--rules", tmp_path, KERNEL)
    assert json.loads(r.out)["errors"][0]["exit_code"] == 4


# ------------------------------------------------------------------ time limits the OS cannot wait for
@pytest.mark.parametrize("limit", [float("inf"), 1e308, 1e7])
def test_huge_engine_timeouts_mean_no_practical_limit(tmp_path, private_tmp, limit):
    """These overflowed the OS's wait (OverflowError, exit 70); they now wait children.MAX_WAIT_S."""
    f = tmp_path / "p.dl"
    f.write_text(".decl n(x:number)\nn(0).\nn(x + 1) :- n(x), x < 3.\n.output n\n")
    prog = load_program([f])
    lint(prog)
    assert ClingoEngine(prog).run({}, timeout=limit)["n"] == [(0,), (1,), (2,), (3,)]
    exe = _broken_souffle(tmp_path, "printf '0\\n1\\n' > \"$out/n.csv\"")  # a stand-in that answers at once
    assert souffle_engine.SouffleEngine(prog, binary=str(exe)).run({}, timeout=limit) == {"n": [(0,), (1,)]}


@pytest.mark.parametrize("limit", [float("nan"), 0.0, -1.0])
def test_meaningless_engine_timeouts_are_usage_errors(tmp_path, private_tmp, limit):
    from ave_decl.lang.errors import UsageError

    prog = _small_prog(tmp_path)
    with pytest.raises(UsageError):
        ClingoEngine(prog).run({}, timeout=limit)
    exe = _broken_souffle(tmp_path, "exit 0")
    with pytest.raises(UsageError):
        souffle_engine.SouffleEngine(prog, binary=str(exe)).run({}, timeout=limit)
    assert _leftovers(private_tmp) == []
