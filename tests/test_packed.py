"""Packed data and reinterpreting views (issue 21, item 3): `pack`, `bitcast`, `perm`/`prmt`,
`view`, `load_vec`/`store_vec` and rows. Tags flow per element through packing and unpacking."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES, checks_simulates_and_runs, front_end_error

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS

GEMM = EXAMPLES / "packed" / "gemm_packed_transpose.ave"

HEAD = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[bf16, (64, 2)], B: Tensor[bf16, (64, 2)], C: Tensor[bf16, (64, 2)]):
    tag(A, lambda r, c: (r, c), "A")
    tag(B, lambda r, c: (r, c), "B")
    t = thread_id(0)
    a = load_vec(A[t, 0], 2)
    b = load_vec(B[t, 0], 2)
"""


def _errors(text: str, confirm: bool = True) -> list:
    (k,) = ave_decl.check(text, path="k.ave", confirm=confirm).kernels
    return [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]


def test_the_packed_transpose_gemm_verifies_simulates_and_runs(ave):
    checks_simulates_and_runs(ave, GEMM, "the output matches the reference")


def test_packed_constructs_are_the_element_moves_they_mean():
    text = printer.kernel(parse_text(GEMM.read_text()).kernels[0])
    assert "lo = local(bf16, (2,))" in text  # hoisted register vectors
    assert "lo[0] = w0[0]\n" in text and "lo[1] = w1[0]\n" in text  # v_perm_b32 0x05040100
    assert "hi[0] = w0[1]\n" in text and "hi[1] = w1[1]\n" in text  # 0x07060302
    assert "for av_part in range(8):\n                av[av_part] = A[bm + r, kt + c + av_part]" in text
    # a u32 view element (n, c) of Bt is Bt's bf16 elements (n, 2c + j): the view shares Bt's rows,
    # so only the last index is scaled (no division for the solver to undo)
    assert "Bt[2 * j, 2 * i + Bt_part] = lo[Bt_part]" in text
    assert "b[b_part] = Bt[w % 2 * 32 + lane % 32, 4 * (ks // 4 + lane // 32) + b_part]" in text  # bf16x4 view


def test_a_wrong_perm_selector_is_caught_at_the_mfma_and_replayed():
    made = OPERATORS["wrong_perm_selector"](GEMM.read_text())
    assert [m.line for m in made] == [40, 41]
    for m in made:
        bad = _errors(m.text)
        assert bad and all(f.replay["confirmed"] for f in bad), (m.line, [(f.invariant, f.replay) for f in bad])
        assert {f.invariant for f in bad} >= {"ave/tag-assert"}


@pytest.mark.parametrize("op, sel, lo, hi", [
    ("perm", "0x05040100", "b[0]", "a[0]"),   # v_perm_b32: bytes 0-3 are the second operand's
    ("perm", "0x07060302", "b[1]", "a[1]"),
    ("perm", "0x01000504", "a[0]", "b[0]"),
    ("prmt", "0x5410", "a[0]", "b[0]"),       # prmt.b32: bytes 0-3 are the first operand's
    ("prmt", "0x7632", "a[1]", "b[1]"),
])
def test_byte_permutes_pick_whole_elements(op, sel, lo, hi):
    text = HEAD + f"    p = {op}(a, b, {sel})\n"
    body = printer.kernel(parse_text(text).kernels[0])
    assert f"p[0] = {lo}\n" in body and f"p[1] = {hi}\n" in body, body


def test_tags_follow_each_half_through_a_permute_a_view_and_a_bitcast():
    """W[t] = perm(a, b, 0x05040100) holds (b[0], a[0]); read back as bf16x2, each half keeps
    its own tag."""
    text = HEAD.replace('lambda r, c: (r, c), "B"', 'lambda r, c: (r + 64, c), "B"') + """    S = shared(bf16, (64, 2))
    W = view(S, u32, (64,))
    W[t] = bitcast(perm(a, b, 0x05040100), u32)
    syncthreads()
    v = bitcast(W[t], bf16x2)
    x = v[0]
    y = v[1]
    assert_tag_eq(x, b[0])
    assert_tag_eq(y, a[0])
"""
    assert ave_decl.check(text, path="k.ave").kernels[0].verdict == Verdict.VERIFIED
    bad = _errors(text.replace("assert_tag_eq(y, a[0])", "assert_tag_eq(y, b[1])"))
    assert [f.invariant for f in bad] == ["ave/tag-assert"] and bad[0].replay["confirmed"]
    assert "lhs tag (0, 0) vs rhs tag (64, 1)" in bad[0].message, bad[0].message  # y is A[t, 0], b[1] is B[t, 1]


def test_a_round_trip_through_a_packed_view_verifies_and_simulates(ave, tmp_path):
    tagged = HEAD.replace("    t = thread_id(0)\n", '    tag(C, lambda r, c: (r, c), "C")\n    t = thread_id(0)\n')
    text = tagged + """    S = shared(bf16, (64, 2))
    W = view(S, u32, (64,))
    W[t] = perm(b, a, 0x03020100)      # all four bytes of the second operand: a
    syncthreads()
    v = S[t]
    C[t, 0] = v[0]
    C[t, 1] = v[1]
    assert_tag_eq(v, a)
"""
    path = tmp_path / "k.ave"
    path.write_text(text)
    assert ave("check", path).code == 0, ave("check", path).out
    r = ave("simulate", path)
    assert r.code == 0 and "shadow" in r.out, r.out


def test_a_self_referencing_permute_reads_every_part_first():
    text = HEAD + "    a = perm(a, b, 0x01000504)\n"
    body = printer.kernel(parse_text(text).kernels[0])
    assert "a_old[a_old_part] = a[a_old_part]" in body and "a[0] = a_old[0]\n" in body and "a[1] = b[0]\n" in body


def test_zero_selector_bytes_give_a_zero_element():
    body = printer.kernel(parse_text(HEAD + "    p = perm(a, b, 0x0c0c0100)\n").kernels[0])
    assert "p[0] = b[0]\n" in body and "p[1] = 0.0\n" in body


def test_vector_registers_rows_and_fp8_words():
    text = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[fp8, (64, 4)], C: Tensor[fp8, (64, 4)]):
    tag(A, lambda r, c: (r, c), "A")
    tag(C, lambda r, c: (r, c), "C")
    t = thread_id(0)
    R = local(fp8x4, (2,))
    R[0] = load_vec(A[t, 0], 4)
    R[1] = perm(R[0], R[0], 0x03020100)
    w = R[1]
    store_vec(C[t, 0], w)
"""
    assert ave_decl.check(text, path="k.ave").kernels[0].verdict == Verdict.VERIFIED
    swapped = text.replace("0x03020100", "0x02030100")  # fp8 elements are single bytes: any byte order is legal
    bad = _errors(swapped)
    assert bad and all(f.replay["confirmed"] for f in bad)


def test_vector_accesses_are_coalesced_when_lanes_read_consecutive_vectors():
    text = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[bf16, (512,)], C: Tensor[bf16, (512,)]):
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    v = load_vec(A[t * 8], 8)
    store_vec(C[t * 8], v)
"""
    (k,) = ave_decl.check(text, path="k.ave").kernels
    assert k.verdict == Verdict.VERIFIED
    assert not [f for f in k.findings if f.invariant == "ave/global-coalescing"]
    scalar = text.replace("    v = load_vec(A[t * 8], 8)\n    store_vec(C[t * 8], v)\n",
                          "    for e in range(8):\n        C[t * 8 + e] = A[t * 8 + e]\n")
    (k,) = ave_decl.check(scalar, path="k.ave").kernels
    assert [f for f in k.findings if f.invariant == "ave/global-coalescing"]


SWIZZLED = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[bf16, (64, 64)], C: Tensor[bf16, (64, 64)]):
    tag(A, lambda r, c: (r, c), "A")
    tag(C, lambda r, c: (r, c), "C")
    t = thread_id(0)
    S = shared(bf16, (64, 64), layout=swizzle(3, 3, 3) @ row_major(64, 64))
    for c in range(8):
        store_vec(S[t, c * 8], load_vec(A[t, c * 8], 8))
    syncthreads()
    for c in range(8):
        x = load_vec(S[c * 8 + t // 8, (t % 8) * 8], 8)
        store_vec(C[c * 8 + t // 8, (t % 8) * 8], x)
"""


def test_vector_accesses_of_a_swizzled_buffer_verify_and_avoid_bank_conflicts():
    """16-byte stores of rows: 8 lanes per phase write the same column of 8 rows, one bank
    without the swizzle; swizzle(3, 3, 3) keeps each 8-element vector contiguous and spreads them."""
    def conflicts(text):
        (k,) = ave_decl.check(text, path="k.ave").kernels
        assert k.verdict == Verdict.VERIFIED
        return [f.location.line for f in k.findings
                if f.invariant == "ave/bank-conflicts" and f.verdict == Verdict.VIOLATION]
    assert 8 not in conflicts(SWIZZLED)
    assert 8 in conflicts(SWIZZLED.replace("layout=swizzle(3, 3, 3) @ row_major(64, 64)", "layout=row_major(64, 64)"))
    bad = _errors(SWIZZLED.replace("x = load_vec(S[c * 8 + t // 8, (t % 8) * 8], 8)",
                                   "x = load_vec(S[c * 8 + t // 8, ((t + 1) % 8) * 8], 8)"))
    assert bad and all(f.replay["confirmed"] for f in bad)


@pytest.mark.parametrize("body, words", [
    ("    p = perm(a, b, 0x05040201)\n", "are not one whole bf16 element"),
    ("    p = perm(a, b, 0x05040108)\n", "a sign-replicated byte"),
    ("    p = prmt(a, b, 0x10000)\n", "selector of prmt must lie in"),
    ("    p = bitcast(a, f16x2)\n", "reinterpret bf16 elements as f16"),
    ("    p = bitcast(a, fp8x4)\n", "split or merge bf16 elements"),
    ("    p = bitcast(a, u32x2)\n", "(8 bytes) of a bf16x2 value (4 bytes)"),
    ("    p = bitcast(t, u32)\n", "bitcast takes a packed value"),
    ("    p = pack(bf16x2, a[0])\n", "takes 2 elements, not 1"),
    ("    p = pack(bf16x3, a[0], a[1], a[0])\n", "must be a vector type"),
    ("    x = a[0] + pack(bf16x2, a[0], a[1])[0]\n", "is a packed value: assign it to a name"),
    ("    S = shared(bf16x2, (64,))\n", "shared buffers hold scalar elements"),
    ("    S = shared(bf16, (64, 2), layout=row_major(64, 2))\n    W = view(S, u32, (64,))\n",
     "shared buffer declared without a layout"),
    ("    S = shared(bf16, (64, 2))\n    W = view(S, u32, (65,))\n", "the view holds 130 bf16 elements"),
    ("    S = shared(bf16, (64, 2))\n    W = view(S, f16x2, (64,))\n", "reinterpret bf16 elements as f16"),
    ("    S = shared(bf16, (64, 2))\n    W = view(S, u32, (64,))\n    W[t] = a[0]\n", "holds 2 bf16 elements"),
    ("    S = shared(bf16, (64, 2))\n    W = view(S, u32, (64,))\n    x = W[t] + 1.0\n", "holds 2 bf16 elements"),
    ("    S = shared(bf16, (64, 8))\n    v = load_vec(S[t, 0], 3)\n", "moves 4, 8 or 16 bytes, not 6"),
    ("    v = load_vec(A[t, 0], 9)\n", "at most 16 bytes"),
    ("    S = shared(bf16, (64, 2))\n    W = view(S, u32, (64,), layout=swizzle(1, 0, 1) @ row_major(64))\n",
     "declare the buffer with the swizzled layout"),
    ("    S = shared(f16, (64, 2))\n    S[t] = a\n", "stores 2 bf16 elements"),
])
def test_bad_packed_constructs_are_located_errors(body, words, tmp_path, ave):
    assert words in front_end_error(ave, tmp_path / "k.ave", HEAD + body)


def test_a_swizzle_on_the_stores_only_of_the_packed_gemm_is_a_violation_not_an_error():
    """catalogue.xor_swizzle_writes_only swizzles As and Bt where they are stored but not where the
    MFMA operands are read back: the operands' K tags no longer pair, which the verifier must
    report (and the simulator replay), not fail on."""
    from ave_decl.transform.catalogue import xor_swizzle_writes_only

    mutant = printer.module(xor_swizzle_writes_only(parse_text(GEMM.read_text())))
    report = ave_decl.check(mutant, path="k.ave", confirm=True)
    assert not report.errors, [e.message for e in report.errors]
    (k,) = report.kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert k.verdict == Verdict.VIOLATION and "ave/tag-assert" in {f.invariant for f in bad}
    assert all(f.replay["confirmed"] for f in bad), [(f.invariant, f.replay) for f in bad]


def test_an_index_past_a_views_row_is_out_of_bounds_even_where_the_storage_has_room():
    """A u32 view (4, 32) of bf16 (4, 64) shares the storage's rows: W[r, 32] is S[r, 64, 65], out
    of bounds, not the next row's first word (the desugaring keeps shared leading indices as they
    stand and scales the last one, so the solver compares plain coordinates)."""
    text = """@kernel(grid=(1,), block=128, wave=64)
def k(A: Tensor[bf16, (128, 2)], C: Tensor[bf16, (128, 2)]):
    tag(A, lambda r, c: (r, c), "A")
    tag(C, lambda r, c: (r, c), "C")
    t = thread_id(0)
    S = shared(bf16, (4, 64))
    W = view(S, u32, (4, 32))
    a = load_vec(A[t, 0], 2)
    W[t // 32, t % 32 + 1] = bitcast(a, u32)
    syncthreads()
    v = bitcast(W[t // 32, t % 32], bf16x2)
    C[t, 0] = v[0]
    C[t, 1] = v[1]
"""
    assert "S[t // 32, 2 * (t % 32 + 1) + S_part]" in printer.kernel(parse_text(text).kernels[0])
    bad = _errors(text)
    assert {f.invariant for f in bad} >= {"ave/buffer-bounds"}, [(f.invariant, f.message) for f in bad]
    (oob,) = [f for f in bad if f.invariant == "ave/buffer-bounds"]
    assert "outside S of shape (4, 64)" in oob.message and oob.replay["confirmed"], (oob.message, oob.replay)
    fixed = text.replace("W[t // 32, t % 32 + 1] =", "W[t // 32, t % 32] =")
    (k,) = ave_decl.check(fixed, path="k.ave").kernels
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.message) for f in k.findings if f.verdict != "VERIFIED"]
