"""Every operand map of the instruction library against the reference sheet: closed forms, exact
table entries, CuTe TV layouts evaluated with our layout algebra, and bijectivity."""
from __future__ import annotations

import functools
import itertools

import pytest

from ave_decl.hw.instructions import INSTRUCTIONS, LOAD_MATRIX, WGMMA_A_REGISTERS, wgmma_accumulator
from ave_decl.hw.layout import Layout, TVLayout
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_expression


@functools.lru_cache(maxsize=None)
def _compiled(text: str):
    # parsed by our grammar first (so the maps are valid DSL), then run with Python's // and %
    return compile(printer.expr(parse_expression(text)), text, "eval")


def ev(text: str, **env) -> int:
    """Evaluate a map expression with Python semantics (the same // and % as the DSL)."""
    return eval(_compiled(text), {}, env)  # noqa: S307 - our own map strings, integers only


def table(op_map, lanes: int):
    return {(lane, v): (ev(op_map.row, lane=lane, v=v), ev(op_map.col, lane=lane, v=v))
            for lane in range(lanes) for v in range(op_map.values)}


@pytest.mark.parametrize("name", sorted(n for n, i in INSTRUCTIONS.items() if i.vendor == "amdgpu"))
def test_amd_mfma_maps(name):
    ins = INSTRUCTIONS[name]
    m, k = ins.m, ins.k
    kpl = k * m // 64
    a, b, c = table(ins.a, 64), table(ins.b, 64), table(ins.c, 64)
    # §1.2 calculator form: A[i][k] lives in lane KPL-group*(k / KPL)*M + i, element k % KPL
    for (lane, e), (i, kk) in a.items():
        assert lane == m * (kk // kpl) + i and e == kk % kpl
    for (lane, e), (kk, j) in b.items():
        assert lane == m * (kk // kpl) + j and e == kk % kpl
    # C/D: §1.1 inverse forms
    for (lane, r), (i, j) in c.items():
        if m == 32:
            assert (r, lane) == (4 * (i // 8) + i % 4, 32 * ((i // 4) % 2) + j)
        else:
            assert (r, lane) == (i % 4, 16 * (i // 4) + j)
    assert sorted(a.values()) == sorted(itertools.product(range(m), range(k)))  # bijective onto M x K
    assert sorted(b.values()) == sorted(itertools.product(range(k), range(m)))
    assert sorted(c.values()) == sorted(itertools.product(range(m), range(m)))


def test_mfma_32x32x8_table_entries():
    """A few exact entries from the calculator's -A/-D tables (§1.2)."""
    ins = INSTRUCTIONS["mfma_f32_32x32x8_bf16"]
    a, c = table(ins.a, 64), table(ins.c, 64)
    assert a[(0, 0)] == (0, 0) and a[(31, 3)] == (31, 3) and a[(32, 0)] == (0, 4) and a[(63, 3)] == (31, 7)
    assert c[(0, 0)] == (0, 0) and c[(0, 4)] == (8, 0) and c[(32, 0)] == (4, 0) and c[(63, 15)] == (31, 31)


@pytest.mark.parametrize("name", sorted(n for n, i in INSTRUCTIONS.items() if i.vendor == "nvidia"))
def test_mma_m16n8k16_maps_match_cute_tv_layouts(name):
    ins = INSTRUCTIONS[name]
    cute = {  # CUTLASS mma_traits_sm80.hpp, SM80_16x8x16 (§2.1)
        "a": (TVLayout(Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))), 16, 16), ins.a),
        "b": (TVLayout(Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))), 8, 16), ins.b),  # (n, k)
        "c": (TVLayout(Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))), 16, 8), ins.c),
    }
    for role, (tv, op) in cute.items():
        got = table(op, 32)
        for (lane, v), (row, col) in got.items():
            x, y = tv.coords(lane, v)
            want = (int(y), int(x)) if role == "b" else (int(x), int(y))  # B's TV layout is N x K
            assert (row, col) == want, (role, lane, v)
        assert len(set(got.values())) == 32 * op.values


def test_mma_ptx_fragment_entries():
    ins = INSTRUCTIONS["mma_m16n8k16"]
    a, b, c = table(ins.a, 32), table(ins.b, 32), table(ins.c, 32)
    assert a[(5, 0)] == (1, 2) and a[(5, 3)] == (9, 3) and a[(5, 7)] == (9, 11)  # g=1, t=1
    assert b[(6, 2)] == (12, 1) and c[(6, 3)] == (9, 5)


@pytest.mark.parametrize("name", sorted(LOAD_MATRIX))
def test_ldmatrix_maps(name):
    ld = LOAD_MATRIX[name]
    seen = set()
    for lane in range(32):
        for r in range(ld.matrices):
            for h in range(2):
                row, col = ev(ld.row, lane=lane, h=h), ev(ld.col, lane=lane, h=h)
                if ld.trans:  # register r, half h holds stored matrix r element [2*(l%4)+h][l/4]
                    assert (row, col) == (2 * (lane % 4) + h, lane // 4)
                else:  # row l/4, columns 2*(l%4) and 2*(l%4)+1
                    assert (row, col) == (lane // 4, 2 * (lane % 4) + h)
                seen.add((r, row, col))
    assert len(seen) == ld.matrices * 64  # every element of every matrix reaches exactly one slot
    providers = {(ev(ld.provider_matrix, lane=lane), ev(ld.provider_row, lane=lane))
                 for lane in range(8 * ld.matrices)}
    assert providers == set(itertools.product(range(ld.matrices), range(8)))


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_wgmma_maps(n):
    acc = wgmma_accumulator(n)
    tv = TVLayout(Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512))), 64, n)
    got = table(acc, 128)
    for (t, v), rc in got.items():
        assert rc == tuple(int(x) for x in tv.coords(t, v))
    assert len(set(got.values())) == 64 * n
    a = table(WGMMA_A_REGISTERS, 128)
    tva = TVLayout(Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))), 64, 16)
    for (t, v), rc in a.items():
        assert rc == tuple(int(x) for x in tva.coords(t, v))
    with pytest.raises(ValueError):
        wgmma_accumulator(12)
