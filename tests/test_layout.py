"""The layout algebra: CuTe's documented examples, bijectivity, and random layouts cross-checked
against NVIDIA's own pure-Python CuTe (`pycute`, from the nvidia-cutlass package)."""
from __future__ import annotations

import numpy as np
import pycute
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ave_decl.hw.expr import ExprTable, evaluate
from ave_decl.hw.layout import (Composed, Layout, Swizzle, TVLayout, coalesce, col_major, complement, composition,
                                is_bijective, logical_divide, right_inverse, row_major)


def P(layout: Layout) -> pycute.Layout:
    return pycute.Layout(layout.shape, layout.stride)


def same(ours: Layout, theirs: pycute.Layout) -> bool:
    return ours.shape == theirs.shape and ours.stride == theirs.stride


# ---------------------------------------------------------------- CuTe doc examples
def test_coalesce_doc_example():
    assert coalesce(Layout((2, (1, 6)), (1, (6, 2)))) == Layout(12, 1)


def test_complement_doc_examples():
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    assert complement(Layout((2, 2), (1, 6)), 24) == Layout((3, 2), (2, 12))


def test_logical_divide_doc_example():
    assert logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)) == Layout(((2, 2), (2, 3)), ((4, 1), (2, 8)))


def test_composition_doc_example():
    # (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z); size-1 modes are dropped, as pycute does
    w, x, y, z = 1, 3, 18, 36
    a, b = Layout((3, 6, 2, 8), (w, x, y, z)), Layout(16, 9)
    r = composition(a, b)
    assert same(r, pycute.composition(P(a), P(b)))
    assert [r(i) for i in range(16)] == [a(b(i)) for i in range(16)]


def test_colexicographic_coordinates():
    lay = Layout(((2, 4), 8), ((1, 16), 2))
    assert lay(3, 5) == lay(((1, 1), 5)) == 1 + 16 + 10
    assert lay(3 + 8 * 5) == lay(3, 5)
    assert list(lay.table()) == [lay(i) for i in range(lay.size)]
    assert row_major(4, 8)(2, 3) == 19 and col_major(4, 8)(2, 3) == 14


def test_symbolic_offset_matches_concrete():
    lay = Composed(Swizzle(3, 3, 3), Layout(((2, 4), 8), ((1, 16), 2)))
    t = ExprTable()
    eid = lay.offset(t, (t.sym("i"), t.sym("j")))
    for i in range(8):
        for j in range(8):
            assert evaluate(t, eid, {"i": i, "j": j}) == lay(i, j)


# ---------------------------------------------------------------- swizzles
@pytest.mark.parametrize("b, m, s", [(3, 3, 3), (3, 4, 3), (2, 0, 3), (1, 2, 4), (2, 3, -3)])
def test_swizzle_matches_pycute_and_is_an_involution(b, m, s):
    ours, theirs = Swizzle(b, m, s), pycute.Swizzle(b, m, s)
    n = theirs.size()
    xs = np.arange(n)
    assert [ours(x) for x in range(n)] == [theirs(x) for x in range(n)]
    assert np.array_equal(ours.evaluate(ours.evaluate(xs)), xs)
    assert is_bijective(ours, n)


def test_swizzle_333_is_the_128B_pattern():
    # reference sheet §3.1: Swizzle<3,3,3> on half offsets XORs bits [3,6) with bits [6,9)
    sw = Swizzle(3, 3, 3)
    for o in range(512):
        assert sw(o) == o ^ (((o >> 6) & 7) << 3)


# ---------------------------------------------------------------- random layouts vs pycute
small = st.integers(1, 4)


@st.composite
def layouts(draw, max_modes: int = 3):
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4, 8])) for _ in range(draw(st.integers(1, max_modes))))
    stride = tuple(draw(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32])) for _ in shape)
    return Layout(shape, stride)


@st.composite
def compact_layouts(draw):
    """Injective layouts (a permutation of a compact layout), so complement/divide are defined."""
    shape = tuple(draw(st.sampled_from([2, 3, 4])) for _ in range(draw(st.integers(1, 3))))
    order = draw(st.permutations(range(len(shape))))
    strides, acc = [0] * len(shape), 1
    for i in order:
        strides[i] = acc
        acc *= shape[i]
    return Layout(shape, tuple(strides))


@given(layouts())
def test_coalesce_vs_pycute(lay):
    ours = coalesce(lay)
    assert same(ours, pycute.coalesce(P(lay)))
    assert [ours(i) for i in range(lay.size)] == [lay(i) for i in range(lay.size)]


@given(compact_layouts(), st.sampled_from([1, 2, 3, 4, 6]), st.sampled_from([1, 2, 3]))
def test_composition_vs_pycute(a, s, d):
    b = Layout(s, d)
    try:
        ours = composition(a, b)
    except ValueError:  # a CuTe divisibility condition fails (pycute checks only one of them)
        return
    assert same(ours, pycute.composition(P(a), P(b)))
    assert [ours(i) for i in range(s)] == [a(b(i)) for i in range(s)]


@given(compact_layouts(), st.sampled_from([1, 24, 48, 100]))
def test_complement_vs_pycute(a, hi):
    ours = complement(a, hi)
    assert same(ours, pycute.complement(P(a), hi))
    # A and its complement together address each offset below size(A) * size(R) at most once
    combined = [a(i) + ours(j) for j in range(ours.size) for i in range(a.size)]
    assert len(set(combined)) == len(combined)


@given(compact_layouts())
def test_logical_divide_and_inverse_vs_pycute(a):
    tile = Layout(2, 1)
    try:
        ours = logical_divide(a, tile)
    except ValueError:
        ours = None
    if ours is not None:
        assert same(ours, pycute.logical_divide(P(a), P(tile)))
        if a.size % 2 == 0:  # an even split: (tile, rest) enumerates exactly A's offsets
            assert sorted(ours.table().tolist()) == sorted(a.table().tolist())
    ri = right_inverse(a)
    assert same(ri, pycute.right_inverse(P(a)))
    assert [a(ri(i)) for i in range(ri.size)] == list(range(ri.size))


# ---------------------------------------------------------------- TV layouts
def test_mma_m16n8k16_a_tv_layout_matches_ptx_table():
    """CUTLASS SM80_16x8x16 ALayout evaluated with our algebra == the PTX fragment table (§2.1)."""
    tv = TVLayout(Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))), 16, 16)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(8):
            row, col = tv.coords(lane, i)
            assert (row, col) == (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))


@pytest.mark.parametrize("n", [8, 16, 64, 128, 256])
def test_wgmma_accumulator_layout_is_the_closed_form_and_bijective(n):
    tv = TVLayout(Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512))), 64, n)
    tid = np.repeat(np.arange(128), n // 2)
    v = np.tile(np.arange(n // 2), 128)
    row, col = tv.coords(tid, v)
    w, lane = tid // 32, tid % 32
    assert np.array_equal(row, 16 * w + (lane >> 2) + 8 * ((v >> 1) & 1))
    assert np.array_equal(col, 8 * (v >> 2) + 2 * (lane & 3) + (v & 1))
    assert len(set(zip(row.tolist(), col.tolist()))) == 64 * n
