"""AMD buffer operations (`make_rsrc`, `raw_buffer_load`, `raw_buffer_store`): range-checked
accesses whose out-of-range loads read 0 and stores are dropped."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES, ONE_WAVE, front_end_error

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS

COPY = EXAMPLES / "buffers" / "buffer_copy.ave"


def test_a_range_checked_copy_verifies_simulates_and_runs(ave):
    assert ave("check", COPY).code == 0
    for m in ("1", "64", "100"):
        r = ave("simulate", COPY, "--sizes", f"M={m}")
        assert r.code == 0 and "the output matches the reference" in r.out, r.out
    assert ave("run", COPY, "--sizes", "M=100").code == 0


def test_buffer_ops_are_the_predicated_accesses_they_mean():
    m = parse_text(COPY.read_text())
    text = printer.kernel(m.kernels[0])
    assert "a_num_bytes = M * 4" in text and "if i * 4 >= 0 and i * 4 < a_num_bytes:" in text
    assert "x = A[i * 4 // 4]" in text and "C[i * 4 // 4] = x" in text
    assert parse_text(printer.module(m)) == m


def test_a_range_larger_than_the_tensor_reads_past_it():
    text = COPY.read_text().replace("make_rsrc(A, M * 4)", "make_rsrc(A, M * 4 + 4)")
    (k,) = ave_decl.check(text, path="range.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert [f.invariant for f in bad] == ["ave/global-bounds"] and bad[0].replay["confirmed"]


def test_a_wrong_offset_is_caught():
    made = OPERATORS["wrong_buffer_offset"](COPY.read_text())
    assert len(made) == 2
    for m in made:
        (k,) = ave_decl.check(m.text, path="m.ave", confirm=True).kernels
        bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
        assert bad and all(f.replay["confirmed"] for f in bad), (m.line, [(f.invariant, f.replay) for f in bad])


def test_a_two_dimensional_tensor_is_addressed_row_major():
    text = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[bf16, (8, 8)], C: Tensor[bf16, (8, 8)]):
    tag(A, lambda r, c: (r, c), "A")
    tag(C, lambda r, c: (r, c), "C")
    a = make_rsrc(A, 128)
    t = thread_id(0)
    x = raw_buffer_load(a, t * 2)
    C[t // 8, t % 8] = x
"""
    (k,) = ave_decl.check(text, path="k.ave").kernels
    assert k.verdict == Verdict.VERIFIED


@pytest.mark.parametrize("body, words", [
    ("    a = make_rsrc(B, 4)\n", "must be a tensor parameter"),
    ("    x = raw_buffer_load(q, 0)\n", "must be a buffer resource"),
    ("    a = make_rsrc(A)\n", "make_rsrc(tensor, num_bytes)"),
    ("    a = make_rsrc(A, 256)\n    raw_buffer_store(a, 0)\n", "raw_buffer_store(rsrc, voffset, value"),
    ("    a = make_rsrc(A, 256)\n    x = raw_buffer_store(a, 0, 1.0)\n", "is a statement of its own"),
])
def test_bad_buffer_ops_are_located_errors(body, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", ONE_WAVE + body)


LDS = EXAMPLES / "buffers" / "lds_pipeline.ave"


def test_direct_to_lds_loads_pipeline_with_counted_waits(ave):
    assert ave("check", LDS).code == 0
    r = ave("simulate", LDS)
    assert r.code == 0 and "the output matches the reference" in r.out, r.out
    assert ave("run", LDS).code == 0


def test_a_vmcnt_that_leaves_the_stage_in_flight_is_a_replayed_violation():
    text = LDS.read_text().replace("s_waitcnt(vmcnt=1)", "s_waitcnt(vmcnt=2)")
    (k,) = ave_decl.check(text, path="wait.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.invariant == "ave/async-copy-wait"]
    assert bad and all(f.replay["confirmed"] for f in bad)


@pytest.mark.parametrize("decl, call, words", [
    ("    S = shared(f32, (64,), layout=swizzle(1, 0, 1))\n", "    buffer_load_lds(S, 0, a, 0)\n", "without a layout"),
    ("    S = shared(bf16, (64,))\n", "    buffer_load_lds(S, 0, a, 0)\n", "between elements of one size"),
    ("    S = shared(f32, (64,))\n", "    s_waitcnt(1)\n", "s_waitcnt takes keywords"),
    ("    S = shared(f32, (64,))\n", "    buffer_load_lds(S, 0, a)\n", "buffer_load_lds(lds, m0, rsrc, voffset"),
])
def test_bad_lds_loads_are_located_errors(decl, call, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", ONE_WAVE + f"    a = make_rsrc(A, 256)\n{decl}{call}")
