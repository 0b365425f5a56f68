"""reset_tags ends provenance; `ave facts` writes Soufflé-compatible files for every relation."""
from __future__ import annotations

from conftest import EXAMPLES

import ave_decl
from ave_decl.datalog.ruleset import load_rules
from ave_decl.report.model import Verdict

KERNEL = """
@kernel(grid=(N // 64,), block=64, wave=64)
def reuse(X: Tensor[f32, (N,)]):
    assume(N % 64 == 0)
    tag(X, lambda i: (i,), "X")
    t = thread_id(0)
    i = block_id(0) * 64 + t
    buf = shared(f32, (64,))
    buf[t] = X[i]
    syncthreads()
    RESET
    v = buf[t]
    assert_tag_eq(v, X[i])
"""


def test_read_after_reset_is_untagged():
    ok = ave_decl.check(KERNEL.replace("RESET", "pass"), path="ok.ave")
    assert ok.kernels[0].verdict == Verdict.VERIFIED
    bad = ave_decl.check(KERNEL.replace("RESET", "reset_tags(buf)"), path="reset.ave")
    (f,) = [f for f in bad.kernels[0].findings if f.invariant == "ave/tag-assert"]
    assert f.verdict == Verdict.VIOLATION  # the reset kills the tagged store: only Bottom reaches the read
    assert "no tagged source" in f.message


def test_facts_files(tmp_path, ave):
    out = tmp_path / "facts"
    r = ave("facts", EXAMPLES / "gemm_lds_mfma.ave", "-o", out)
    assert r.code == 0, r.out
    names = {p.stem for p in out.glob("*.facts")}
    assert names == load_rules().inputs
    rows = (out / "stmt.facts").read_text().splitlines()
    assert all(len(line.split("\t")) == 7 for line in rows)
    assert (out / "assert_eq.facts").read_text() == ""  # empty relations are written too
    mma = (out / "mma.facts").read_text().split("\t")
    assert mma[2] == "mfma_f32_32x32x8_bf16"


def test_facts_bad_kernel_exit_3(tmp_path, ave):
    bad = tmp_path / "bad.ave"
    bad.write_text("@kernel(grid=(1,), block=64)\ndef k(X: Tensor[f32, (N,)]):\n    v = X[q]\n")
    r = ave("facts", bad, "-o", tmp_path / "out")
    assert r.code == 3
    assert f"{bad}:3:" in r.err
