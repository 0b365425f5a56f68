"""Copy groups (issue 19): `async_commit()` and `async_wait(n)` (PTX cp.async.commit_group /
wait_group n) in the language, the rules, the simulator, and the nvptx backend."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES
from test_codegen_nvptx import needs_toolchain

import ave_decl
from ave_decl.codegen import get_backend
from ave_decl.lang.parser import parse_text
from ave_decl.lang.resolve import resolve_imports
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source

PIPELINE3 = EXAMPLES / "pipelines" / "gemm_pipelined3.ave"

# Two tiles of 64 elements per thread block, one copy group each; the second tile is read after a
# wait that leaves WAIT groups in flight.
TWO_GROUPS = """@kernel(grid=(1,), block=64, wave=64, reference="C = A")
def two_groups(A: Tensor[f32, (2, 64)], C: Tensor[f32, (2, 64)]):
    tag(A, lambda i, j: (i, j), "A")
    tag(C, lambda i, j: (i, j), "C")
    t = thread_id(0)
    S = shared(f32, (2, 64))
    async_copy(S[0, t], A[0, t])
    async_commit()
    async_copy(S[1, t], A[1, t])
    async_commit()
    async_wait(WAIT)
    C[0, t] = S[0, t]
    async_wait(FINAL)
    C[1, t] = S[1, t]
"""


def two_groups(wait: int, final: str) -> str:
    return TWO_GROUPS.replace("WAIT", str(wait)).replace("FINAL", final)


def verdict(text: str, confirm: bool = False):
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return k


@pytest.mark.parametrize("wait, final, expected", [
    (1, "0", Verdict.VERIFIED),    # the first group has landed at wait(1), the second at wait(0)
    (1, "", Verdict.VERIFIED),     # async_wait() waits for everything
    (2, "0", Verdict.VIOLATION),   # wait(2) leaves both groups in flight: S[0] is read too early
    (1, "1", Verdict.VIOLATION),   # the second group is still in flight at the second read
])
def test_wait_group_counts(wait, final, expected):
    k = verdict(two_groups(wait, final), confirm=True)
    assert k.verdict == expected, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    for f in k.findings:
        if f.verdict == Verdict.VIOLATION and f.severity == "error":
            assert f.invariant == "ave/async-copy-wait" and f.replay["confirmed"], f.replay


def test_the_simulator_lands_each_group_no_earlier_than_allowed():
    ((_, ok),) = simulate_source(SourceFile("k.ave", two_groups(1, "0")), {})
    assert ok.reference["ok"] and not ok.races
    ((_, early),) = simulate_source(SourceFile("k.ave", two_groups(1, "1")), {})
    assert not early.reference["ok"]
    assert [r["kind"] for r in early.races] == ["ASYNC"]


def test_uncommitted_copies_are_not_waited_for_by_a_group_wait():
    """cp.async.wait_group only concerns committed groups: without a commit the copy stays in flight."""
    text = two_groups(0, "0").replace("    async_copy(S[1, t], A[1, t])\n    async_commit()\n",
                                      "    async_copy(S[1, t], A[1, t])\n")
    k = verdict(text)
    assert k.verdict == Verdict.VIOLATION
    (f,) = [f for f in k.findings if f.verdict == Verdict.VIOLATION]
    assert f.invariant == "ave/async-copy-wait" and f.location.line == 13 and "copy group" in f.message


def test_three_stage_pipeline_verifies_and_waiting_one_group_too_few_does_not(ave):
    r = ave("check", PIPELINE3, EXAMPLES / "pipelines" / "gemm_pipelined3_wait2.ave")
    assert r.code == 1, r.out
    assert "VERIFIED  gemm_pipelined3 " in r.out and "VIOLATION gemm_pipelined3_wait2" in r.out
    assert "error[ave/async-copy-wait]" in r.out


@pytest.mark.slow
def test_the_three_stage_pipelines_counterexample_replays(ave):
    """About a minute: the replay simulates the 3-stage kernel (test_wait_group_counts replays
    the same rule on a small kernel in make test)."""
    r = ave("check", "--confirm", EXAMPLES / "pipelines" / "gemm_pipelined3_wait2.ave")
    assert r.code == 1, r.out
    assert "error[ave/async-copy-wait]" in r.out and "confirmed by replay" in r.out
    assert "NOT confirmed" not in r.out


@pytest.mark.parametrize("call, message", [
    ("async_wait(-1)", "needs 0 <= n <= 7"),
    ("async_wait(8)", "needs 0 <= n <= 7"),
    ("async_wait(t)", "must be a constant integer"),
    ("async_commit(1)", "async_commit"),
])
def test_wait_group_errors_are_located(ave, tmp_path, call, message):
    p = tmp_path / "bad.ave"
    p.write_text(two_groups(1, "0").replace("async_wait(1)", call))
    r = ave("check", p)
    assert r.code == 3, r.out
    assert f"{p}:11:" in r.out + r.err and message in r.out + r.err


def test_nvptx_emits_commit_and_wait_group():
    text = two_groups(1, "0").replace("wave=64", "warp=32")
    module = parse_text(text, "k.ave")
    ptx = get_backend("nvptx").compile(module.kernels[0], resolve_imports(module), "sm_90a", "ptx")
    out = " ".join(ptx.artifacts["ptx"].text.split())
    assert out.count("cp.async.commit_group;") == 2
    assert "cp.async.wait_group 1;" in out and "cp.async.wait_group 0;" in out


@pytest.mark.slow
def test_the_three_stage_pipeline_runs_on_the_host(ave):
    r = ave("run", PIPELINE3, "--sizes", "M=64,N=64,K=256")
    assert r.code == 0, r.out + r.err
    assert "0 of 4096 elements differ" in r.out


@needs_toolchain
def test_sass_waits_on_the_copy_group_scoreboard():
    module = parse_text(two_groups(1, "0").replace("wave=64", "warp=32"), "k.ave")
    sass = get_backend("nvptx").compile(module.kernels[0], resolve_imports(module), "sm_90a", "sass")
    text = sass.artifacts["sass"].text
    assert text.count("LDGDEPBAR") == 2
    assert "DEPBAR.LE SB0, 0x1" in text and "DEPBAR.LE SB0, 0x0" in text
