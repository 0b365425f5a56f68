"""One kernel's obligations decided by several processes (solver/parallel.py): the report is the
one a single process gives, a helper that dies or raises costs only time or is reported as if
met in this process, and proofs a helper made reach this process's proof memo. Each check runs
in a fresh process (tests/parallel_probe.py): forking helpers is refused once JAX is loaded,
which other tests in a worker may have done."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ave_decl.solver import parallel

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "parallel_probe.py"
# violations with counterexamples and violation sets (async copies), K pairing families
WAIT2 = ROOT / "examples" / "pipelines" / "gemm_pipelined3_wait2.ave"
MI300X = ROOT / "examples" / "speed" / "gemm_mfma_mi300x.ave"
# a small kernel decided here alone, whose one violation set a helper counts meanwhile
TRANSPOSED = ROOT / "examples" / "gemm_lds_mfma_transposed.ave"


def _probe(path: Path, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(PROBE), str(path), *args], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def alone() -> dict[str, dict]:
    return {p.name: _probe(p, "--jobs", "1")["report"] for p in (WAIT2, MI300X, TRANSPOSED)}


@pytest.mark.parametrize("path", [WAIT2, MI300X], ids=lambda p: p.stem)
def test_two_jobs_give_the_report_of_one(path, alone):
    got = _probe(path, "--jobs", "2")
    assert got["from_helpers"] > 0  # a helper did decide obligations
    assert got["learned"] > 0  # and its proofs reached this process's memo
    assert got["report"] == alone[path.name]


def test_a_set_counted_while_obligations_are_decided_gives_the_report_of_one(alone):
    got = _probe(TRANSPOSED, "--jobs", "2")
    assert got["sets_ahead"] == 1  # its K-pairing set, counted by a helper forked at the violation
    assert got["report"] == alone[TRANSPOSED.name]
    (pairing,) = [f for f in got["report"]["kernels"][0]["findings"] if f["invariant"] == "ave/mma-k-pairing"]
    assert pairing["violation_set"]["count"] == 256  # counted, not left out


def test_a_helper_that_dies_counting_a_set_ahead_costs_only_time(alone):
    got = _probe(TRANSPOSED, "--jobs", "2", "--fault", "kill-counting")
    assert got["sets_ahead"] == 0
    assert got["report"] == alone[TRANSPOSED.name]


def test_a_helper_that_dies_costs_only_time(alone):
    got = _probe(WAIT2, "--jobs", "2", "--fault", "kill")
    assert got["from_helpers"] == 0
    assert got["report"] == alone[WAIT2.name]


def test_a_helper_that_dies_counting_a_violation_set_costs_only_time(alone):
    assert _probe(WAIT2, "--jobs", "2", "--fault", "kill-counting")["report"] == alone[WAIT2.name]


def test_a_fork_that_fails_leaves_the_work_here(alone):
    got = _probe(WAIT2, "--jobs", "2", "--fault", "no-fork")
    assert got["from_helpers"] == 0
    assert got["report"] == alone[WAIT2.name]


def test_an_error_is_reported_as_one_process_meets_it():
    one, two = (_probe(WAIT2, "--jobs", n, "--fault", "raise")["report"] for n in ("1", "2"))
    assert [e["message"].split(" (at ")[0] for e in one["errors"]] == ["internal error: KeyError: 'injected'"]
    assert two == one  # the same error, at the same place (it is raised again in this process)


def test_helpers_die_with_their_parent():
    out = subprocess.run([sys.executable, str(PROBE), str(MI300X), "--jobs", "2", "--fault", "orphan"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == -9
    helpers = json.loads(out.stdout.splitlines()[0])["helpers"]
    assert helpers
    for pid in helpers:  # the kernel kills them at once (PR_SET_PDEATHSIG); 60 s is only a bound
        for _ in range(600):
            if not _running(pid):
                break
            time.sleep(0.1)
        assert not _running(pid)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for an init that may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_one_job_forks_no_helper():
    assert _probe(WAIT2, "--jobs", "1")["from_helpers"] == 0


def test_no_helper_is_forked_where_forking_is_unsafe(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", object())
    assert not parallel.can_fork()


def test_units_keep_sharing_relations_whole_and_heaviest_first():
    obligations = [(1, "a", "raw_race", 0, 0), (2, "k", "k_pairing", 0, 0), (3, "a", "raw_race", 0, 0),
                   (4, "k", "k_pairing", 0, 0), (5, "s", "broadcast", 0, 0)]
    assert parallel.work_units(obligations) == [[1, 3], [4], [0], [2]]
    # bounds are proved as disjunctions of several obligations (families.DISJUNCTIVE): one unit
    bounds = [(1, "b", "in_bounds", 0, 0), (2, "a", "raw_race", 0, 0), (3, "b", "in_bounds", 0, 0)]
    assert parallel.work_units(bounds) == [[0, 2], [1]]


def test_jobs_is_a_positive_count_and_changes_no_report(ave):
    assert ave("check", "-j", "0", str(WAIT2)).code == 2
    one, two = (ave("check", "--json", "--no-timings", "-j", n, str(WAIT2)) for n in ("1", "2"))
    assert one.code == two.code == 1 and one.json() == two.json()
