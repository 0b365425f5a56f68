"""Front-end and CLI fuzzing (issue 20): `ave check`, `ave audit` and `ave simulate` on hostile
kernel files, hostile paths, hostile cache entries and hostile option values.

Every run must be well behaved (cli_fuzz_support.assert_well_behaved): a documented exit code,
never 70; no traceback; `file:line:col` on every front-end error; bounded error lines; valid
JSON with --json; and it must end (a bound of minutes, far from a normal run: a hang fails, a
slow machine does not). Most runs are in-process (click's CliRunner, fast); a few go through a
real `python -m ave_decl.cli` process.

Budgets are explicit per profile (`budget(default, long)`): the default profile (`make test`)
runs about 215 inputs in about 40 s; `--hypothesis-profile=long` runs >= 100,000 kernel
inputs: 75,000 through the front end (`ave facts`, test_front_end_survives_fuzzed_kernel_files),
about 18,000 through `ave check` (4,000 runs of 1-8 files), about 10,000 through the rest.
Set AVE_CLI_FUZZ_TALLY=FILE to have the count of inputs actually run written to FILE.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .cli_fuzz_support import (EXAMPLES, HOSTILE_KERNELS, TALLY, assert_well_behaved, budget, count, invoke,
                               is_nan_text, kernel_bytes, mutated_kernel, number_texts, run_process)

FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                  HealthCheck.filter_too_much, HealthCheck.large_base_example])
NAIVE = EXAMPLES / "gemm_naive.ave"
UNTAGGED = EXAMPLES / "untagged_operand.ave"


@pytest.fixture(scope="module", autouse=True)
def report_tally():
    yield
    print(f"\ncli fuzz inputs run: {json.dumps(TALLY, sort_keys=True)} (total {sum(TALLY.values())})")


def _write(directory: Path, contents: list[bytes]) -> list[str]:
    paths = []
    for i, data in enumerate(contents):
        p = directory / f"k{i}.ave"
        p.write_bytes(data)
        paths.append(str(p))
    return paths


KNOWN_BAD = sorted(HOSTILE_KERNELS)


# ---------------------------------------------------------------- ave check on fuzzed files

@settings(max_examples=budget(40, 75_000), **FUZZ)
@given(data=kernel_bytes())
@example(data=HOSTILE_KERNELS["nested_ifs_700"].encode())
@example(data=HOSTILE_KERNELS["huge_shift"].encode())
@example(data=(EXAMPLES / "gemm_mma_ldmatrix.ave").read_bytes().replace(b"Bs[lane % 16, wn]", b"Bs[lane % 16, ]"))
def test_front_end_survives_fuzzed_kernel_files(data):
    """The volume test: `ave facts` runs exactly the front end of `ave check` (reading, parsing,
    lowering with its semantic checks, the solver-derived facts) and nothing after it, so most of
    the long profile's inputs go through here."""
    with tempfile.TemporaryDirectory() as d:
        (path,) = _write(Path(d), [data])
        o = invoke(["facts", path, "-o", str(Path(d) / "facts")])
        count("facts_files")
        assert_well_behaved(o, [path])


@settings(max_examples=budget(15, 4_000), **FUZZ)
@given(files=st.lists(kernel_bytes(), min_size=1, max_size=8), as_json=st.booleans())
@example(files=[HOSTILE_KERNELS["loop_variable_after_loop"].encode()], as_json=False)
@example(files=[HOSTILE_KERNELS["nested_ifs_700"].encode()], as_json=False)
@example(files=[HOSTILE_KERNELS[k].encode() for k in ("nested_parens_5000", "nested_unary_5000")], as_json=False)
@example(files=[HOSTILE_KERNELS["huge_shift"].encode()], as_json=True)
@example(files=[HOSTILE_KERNELS["huge_int_literal"].encode()], as_json=False)
@example(files=[HOSTILE_KERNELS["literal_100kb"].encode()], as_json=False)
@example(files=[HOSTILE_KERNELS[k].encode() for k in ("block_zero", "block_negative", "block_1024x1024")],
         as_json=True)
@example(files=[HOSTILE_KERNELS[k].encode() for k in ("bom", "crlf", "cr_only", "form_feed")], as_json=False)
@example(files=[b"\xff\xfe garbage", b"", b"\x00" * 10, NAIVE.read_bytes()], as_json=True)
def test_check_survives_fuzzed_kernel_files(files, as_json):
    """`ave check` on 1-8 fuzzed files at once (one bad file never stops the batch)."""
    with tempfile.TemporaryDirectory() as d:
        paths = _write(Path(d), files)
        o = invoke(["check", "--no-violation-sets", "--timeout", "2", *(["--json"] if as_json else []), *paths])
        count("check_files", len(paths))
        assert_well_behaved(o, paths, as_json=as_json)


@settings(max_examples=budget(5, 2_000), **FUZZ)
@given(text=mutated_kernel(), violation_sets=st.booleans())
def test_check_survives_fuzzed_kernels_with_violation_sets(text, violation_sets):
    """One mutated kernel, with the violation-set enumeration on (the counting path)."""
    with tempfile.TemporaryDirectory() as d:
        (path,) = _write(Path(d), [text.encode("utf-8", "surrogatepass")])
        o = invoke(["check", "--timeout", "2", *([] if violation_sets else ["--no-violation-sets"]), path])
        count("check_violation_sets")
        assert_well_behaved(o, [path])


# ---------------------------------------------------------------- timeouts

TIMEOUT_FILES = {"verified": NAIVE, "violation": UNTAGGED}


@settings(max_examples=budget(20, 3_000), **FUZZ)
@given(timeout=st.none() | number_texts(["0.5", "2", "10"]),
       engine_timeout=st.none() | number_texts(["5", "30", "60"]),
       which=st.sampled_from(["verified", "violation", "broken"]), as_json=st.booleans())
@example(timeout="nan", engine_timeout=None, which="verified", as_json=False)
@example(timeout="inf", engine_timeout=None, which="verified", as_json=False)
@example(timeout="1e308", engine_timeout=None, which="verified", as_json=True)
@example(timeout=None, engine_timeout="nan", which="verified", as_json=False)
@example(timeout=None, engine_timeout="inf", which="violation", as_json=False)
@example(timeout=None, engine_timeout="1e308", which="verified", as_json=False)
def test_check_timeouts(timeout, engine_timeout, which, as_json):
    """`--timeout` / `--engine-timeout` as typed: a NaN is a usage error (exit 2), never a silently
    disabled limit; nothing is an internal error."""
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "k.ave")
        Path(path).write_bytes(b"@kernel(\n" if which == "broken" else TIMEOUT_FILES[which].read_bytes())
        args = ["check", *(["--timeout", timeout] if timeout is not None else []),
                *(["--engine-timeout", engine_timeout] if engine_timeout is not None else []),
                *(["--json"] if as_json else []), path]
        o = invoke(args)
        count("check_timeouts")
        assert_well_behaved(o, [path], as_json=as_json)
        if any(v is not None and is_nan_text(v) for v in (timeout, engine_timeout)):
            assert o.code == 2, "a NaN timeout must be refused as a usage error\n" + o.describe()


# ---------------------------------------------------------------- hostile paths

PATH_KINDS = ["good", "broken", "fifo", "dir.ave", "missing", "dangling", "loop", "empty", "binary", "dir"]


def _make_path(d: Path, i: int, kind: str) -> str:
    p = d / f"p{i}.ave"
    if kind == "good":
        p.write_bytes(NAIVE.read_bytes())
    elif kind == "broken":
        p.write_text("@kernel(grid=(1,)\n")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind in ("dir.ave", "dir"):
        p = p if kind == "dir.ave" else d / f"p{i}"
        p.mkdir()
        (p / "inner.ave").write_text("garbage(\n")
    elif kind == "dangling":
        p.symlink_to(d / "nowhere.ave")
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "binary":
        p.write_bytes(bytes(range(256)))
    return str(p)


@settings(max_examples=budget(8, 500), **FUZZ)
@given(kinds=st.lists(st.sampled_from(PATH_KINDS), min_size=1, max_size=5))
@example(kinds=["fifo"])
@example(kinds=["dir.ave", "good"])
@example(kinds=["dangling", "loop", "good"])
def test_check_survives_hostile_paths(kinds):
    """FIFOs, directories, dangling symlinks, symlink loops among the files: the run ends, and a
    good file among them is still checked (one bad file never stops a batch)."""
    with tempfile.TemporaryDirectory() as d:
        paths = [_make_path(Path(d), i, k) for i, k in enumerate(kinds)]
        o = invoke(["check", "--no-violation-sets", *paths])
        count("check_paths", len(paths))
        assert_well_behaved(o, paths)
        for p, k in zip(paths, kinds):
            if k == "good":
                assert f"VERIFIED  gemm_naive ({p})" in o.out, f"the good file {p} was not checked\n" + o.describe()


# ---------------------------------------------------------------- ave audit

CACHE_ENTRY_CONTENTS = st.one_of(
    st.sampled_from([b"", b"{}", b"[]", b"null", b"0", b'"x"', b'{"kernels": [], "errors": []}',
                     b'{"kernels": [{}], "errors": [{}]}', b'{"kernels": null}', b"[" * 100_000, b"\xff\xfe",
                     b'{"format": 1, "key": "", "path": "", "sha256": "", "payload": {}}', b"NaN"]),
    st.binary(max_size=200),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
                     ["kernels", "errors", "format", "key", "path", "sha256", "payload", "file", "verdict"]), c,
                     max_size=4), max_leaves=10).map(lambda v: json.dumps(v).encode()),
)


def _summary(o) -> str:
    """The audit's counts line without its timing and cache figures."""
    line = [ln for ln in o.out.splitlines() if ln.startswith("audit: ")][-1]
    return line.split("; ")[0]


@settings(max_examples=budget(1, 300), **FUZZ)
@given(files=st.lists(kernel_bytes(), min_size=1, max_size=4),
       kinds=st.lists(st.sampled_from(["dir.ave", "dangling", "loop", "fifo", "good"]), max_size=3),
       entry=CACHE_ENTRY_CONTENTS, jobs=st.sampled_from(["1", "2"]))
@example(files=[NAIVE.read_bytes()], kinds=["dir.ave", "fifo"], entry=b'{"kernels": [], "errors": []}', jobs="1")
@example(files=[NAIVE.read_bytes(), b"garbage(\n"], kinds=["dangling"], entry=b"null", jobs="2")
def test_audit_survives_fuzzed_trees_and_cache_entries(files, kinds, entry, jobs):
    """`ave audit` on a tree of fuzzed files and hostile entries, twice: the second run reads a
    cache whose every entry was overwritten with hostile content, and must report the same."""
    with tempfile.TemporaryDirectory() as d:
        tree, cache = Path(d) / "tree", Path(d) / "cache"
        tree.mkdir()
        paths = _write(tree, files) + [_make_path(tree, 100 + i, k) for i, k in enumerate(kinds)]
        args = ["audit", "-j", jobs, "--file-timeout", "600", "--timeout", "2", "--cache-dir", str(cache), str(tree)]
        first = invoke(args)
        count("audit_files", len(paths))
        assert_well_behaved(first, paths)
        for e in cache.rglob("*"):
            if e.is_file():
                e.write_bytes(entry)
        second = invoke(args)
        assert_well_behaved(second, paths)
        assert _summary(second) == _summary(first), \
            "a hostile cache entry changed the audit\n" + first.describe() + "\n---\n" + second.describe()


@settings(max_examples=budget(4, 300), **FUZZ)
@given(file_timeout=number_texts(["30", "120"]), timeout=st.none() | number_texts(["2"]),
       json_out=st.booleans())
@example(file_timeout="nan", timeout=None, json_out=False)
@example(file_timeout="inf", timeout=None, json_out=True)
@example(file_timeout="1e308", timeout="nan", json_out=False)
@example(file_timeout="0.1", timeout=None, json_out=False)  # a worker cannot even start in 0.1 s (session 7)
def test_audit_timeouts(file_timeout, timeout, json_out):
    """`audit --file-timeout` / `--timeout` as typed; a NaN is a usage error (it would silently
    disable the per-file limit)."""
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "tree"
        tree.mkdir()
        paths = _write(tree, [UNTAGGED.read_bytes(), b"garbage(\n"])
        report = Path(d) / "report.json"
        o = invoke(["audit", "-j", "1", "--no-cache", "--file-timeout", file_timeout,
                    *(["--timeout", timeout] if timeout is not None else []),
                    *(["--json", str(report)] if json_out else []), str(tree)])
        count("audit_timeouts")
        assert_well_behaved(o, paths)
        if is_nan_text(file_timeout) or (timeout is not None and is_nan_text(timeout)):
            assert o.code == 2, "a NaN timeout must be refused as a usage error\n" + o.describe()
        if json_out and o.code != 2:
            json.loads(report.read_text())


# ---------------------------------------------------------------- ave simulate

SIZE_NAMES = st.sampled_from(["M", "N", "K", "X", "m", "", " M", "M M", "é", "M=N"])


def _size_value(name: str) -> st.SearchStrategy[str]:
    """Small values the kernel accepts (one shape: the simulator compiles per shape), values it
    rejects, and values no machine holds; never a mid-range size that would make a long run."""
    ok = {"M": "16", "N": "16", "K": "8"}.get(name, "16")
    return st.one_of(
        st.just(ok), st.just(ok),
        st.sampled_from(["0", "-16", "-1", "17", "1", "3", "15", "2²", "١٦", "16.0", "1e3", "nan", "inf", "",
                         "0x10", "1_6", "+16", "--16", " 16", "16 ", "=16", str(2 ** 31), str(2 ** 63),
                         str(10 ** 30), "9" * 5000]),
        st.integers(-(2 ** 70), -1).map(str),
        st.integers(2 ** 40, 2 ** 80).map(str),
    )


@st.composite
def sizes_text(draw) -> str:
    parts = []
    for name in draw(st.lists(SIZE_NAMES, max_size=5)):
        parts.append(f"{name}={draw(_size_value(name))}" if draw(st.integers(0, 9)) else name)
    return draw(st.sampled_from([",", ", ", ";", ",,"])).join(parts)


@settings(max_examples=budget(12, 1_500), **FUZZ)
@given(kernel=st.sampled_from(["naive", "untagged", "broken", "injection"]), sizes=sizes_text(),
       blocks=st.sampled_from(["all", "all", "0,0", "0", "abc", "99,99", "-1,0", "", "0,0,0,0", "1e9,0", "٠,٠"]),
       seed=st.sampled_from(["0", "-1", str(2 ** 32), str(2 ** 64), "abc"]),
       kernel_name=st.none() | st.sampled_from(["gemm_naive", "nope", ""]),
       flags=st.lists(st.sampled_from(["--no-shadow", "--json"]), unique=True))
@example(kernel="naive", sizes="M=16,N=16,K=8", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="injection", sizes="M=16,N=16,K=8", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=1099511627776,N=16,K=8", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=-16,N=16,K=8", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=0,N=16,K=8", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=16,N=16,K=2²", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=16,N=16,K=8", blocks="abc", seed="0", kernel_name=None, flags=[])
@example(kernel="untagged", sizes="N=16", blocks="all", seed="0", kernel_name=None, flags=[])
@example(kernel="naive", sizes="M=16,N=16,K=8", blocks="all", seed=str(2 ** 64), kernel_name=None, flags=[])
def test_simulate_survives_fuzzed_sizes(kernel, sizes, blocks, seed, kernel_name, flags):
    """`ave simulate FILE --sizes ...`: sizes that are negative, zero, rejected by assume(...), too
    large for any memory or not numbers at all, hostile --blocks/--seed/--kernel; and a reference
    that tries to escape into numpy: nothing it names may run (the sentinel file stays absent)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.ave"
        sentinel = Path(d) / "pwned"
        text = {"naive": NAIVE.read_text(), "untagged": UNTAGGED.read_text(), "broken": "@kernel(grid=(1,)\n",
                "injection": NAIVE.read_text().replace(
                    'reference="C = A @ B"',
                    f"reference=\"C = A @ B + 0 * np.f2py.os.system('touch {sentinel}')\"")}[kernel]
        path.write_text(text)
        o = invoke(["simulate", str(path), "--sizes", sizes, "--blocks", blocks, "--seed", seed,
                    *(["--kernel", kernel_name] if kernel_name is not None else []), *flags])
        count("simulate")
        assert_well_behaved(o, [str(path)], as_json="--json" in flags and o.code in (0, 1))
        assert not sentinel.exists(), "the reference expression ran a shell command\n" + o.describe()


@pytest.mark.parametrize("name", KNOWN_BAD)
def test_simulate_survives_the_known_bad_kernels(name):
    """`ave simulate` on each known-bad kernel of issue 20: the simulator evaluates the AST itself
    (not through the facts lowering), so each of its refusals needs a location of its own."""
    with tempfile.TemporaryDirectory() as d:
        (path,) = _write(Path(d), [HOSTILE_KERNELS[name].encode()])
        o = invoke(["simulate", path, "--max-memory", "1"])
        count("simulate")
        assert_well_behaved(o, [path])


@settings(max_examples=budget(3, 200), **FUZZ)
@given(reference=st.sampled_from([
    "C = A @ B + 0 * np.f2py.os.system('touch {s}')", "C = __import__('os').system('touch {s}')",
    "C = (lambda: open('{s}', 'w'))()", "C = A.__class__", "C = [x for x in ().__class__.__base__.__subclasses__()]",
    "C = exec(\"open('{s}','w')\")", "C = eval(\"open('{s}','w')\")", "C = A @ B; open('{s}', 'w')",
    "C = getattr(A, 'tofile')('{s}')", "C = A.tofile('{s}')", "C = np.save('{s}', A)",
]) | st.text(max_size=60))
def test_simulate_never_runs_the_reference(reference):
    """Hostile reference strings (each would create the sentinel file if it were evaluated)."""
    with tempfile.TemporaryDirectory() as d:
        path, sentinel = Path(d) / "k.ave", Path(d) / "pwned"
        ref = reference.replace("{s}", str(sentinel)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
        path.write_text(NAIVE.read_text().replace('reference="C = A @ B"', f'reference="{ref}"'))
        o = invoke(["simulate", str(path), "--sizes", "M=16,N=16,K=8"])
        count("simulate_reference")
        assert_well_behaved(o, [str(path)])
        assert not sentinel.exists(), "the reference expression ran code\n" + o.describe()
        o = invoke(["check", "--no-violation-sets", str(path)])
        assert_well_behaved(o, [str(path)])
        assert not sentinel.exists(), "the reference expression ran code under check\n" + o.describe()


# ---------------------------------------------------------------- the process boundary

@settings(max_examples=budget(1, 300), **FUZZ)
@given(data=kernel_bytes(), command=st.sampled_from(["check", "check-json", "timeout", "simulate"]),
       value=number_texts(["2"]), size=_size_value("M"))
@example(data=NAIVE.read_bytes(), command="simulate", value="2", size="16")
def test_cli_in_a_real_process(data, command, value, size):
    """A few runs through `python -m ave_decl.cli`: real stdio, warnings printed to stderr
    (numpy RuntimeWarnings must not leak), the real exit status."""
    with tempfile.TemporaryDirectory() as d:
        (path,) = _write(Path(d), [data])
        args = {"check": ["check", "--no-violation-sets", path],
                "check-json": ["check", "--json", "--no-violation-sets", path],
                "timeout": ["check", "--timeout", value, "--no-violation-sets", path],
                "simulate": ["simulate", path, "--sizes", f"M={size},N=16,K=8", "--no-shadow"]}[command]
        o = run_process(args, cwd=Path(d))
        count("process")
        assert_well_behaved(o, [path], as_json=command == "check-json", process=True)
