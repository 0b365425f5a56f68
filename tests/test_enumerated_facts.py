"""Facts decided by enumeration instead of Z3 (issue 16): per-lane strides of global accesses
whose coordinates add block offsets, sizes or symbolic-loop terms to a lane part, and the first
bank-conflicting phase of a shared access, vectorised over loop points. Each must give exactly
what the slower path gave."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ave_decl.facts.lower import lower_module
from ave_decl.hw.expr import ExprTable
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.solver import derived_facts
from ave_decl.solver.access_queries import BANKS, _first_conflicting_phase

ROOT = Path(__file__).resolve().parent.parent


def _separable(tree, shared: set[str]) -> bool:
    """`tree` in prefix form: ("add", "bid:0", ("mul", "tid:0", 2)); strings are symbols."""
    t = ExprTable()

    def build(node) -> int:
        if isinstance(node, int):
            return t.const(node)
        if isinstance(node, str):
            return t.sym(node)
        op, *args = node
        return t.op(op, *[build(a) for a in args])

    return derived_facts._lane_separable(t, build(tree), shared)


@pytest.mark.parametrize("tree, shared, expected", [
    (('add', ('mul', 'bid:0', 64), ('floordiv', 'tid:0', 8)), {"bid:0"}, True),
    (('sub', ('add', 'loop:1', ('mod', 'tid:0', 8)), 'size:K'), {"loop:1", "size:K"}, True),
    (('mul', ('add', 'bid:0', 'tid:0'), 4), {"bid:0"}, True),
    (('neg', ('add', 'bid:0', 'tid:0')), {"bid:0"}, True),
    (('floordiv', ('add', 'bid:0', 'tid:0'), 8), {"bid:0"}, False),  # which side of a multiple of 8
    (('mul', 'size:N', 'tid:0'), {"size:N"}, False),  # a size-dependent lane stride
    (('mod', ('mul', 'bid:0', 64), 7), {"bid:0"}, True),  # no lane part: nothing to separate
    (('floordiv', 'tid:0', 2), {"bid:0"}, True),  # no shared part
])
def test_lane_separability(tree, shared, expected):
    assert _separable(tree, shared) is expected


def _stride_rows(path: Path) -> list[list[tuple]]:
    src = SourceFile.read(path)
    out = []
    for kf in lower_module(parse_source(src), src):
        derived_facts.add_semantic_facts(kf)
        out.append(sorted(kf.relation("access_lane_coord_stride") + kf.relation("access_lane_stride")))
    return out


@pytest.mark.parametrize("name", ["gemm_lds_mfma.ave", "gemm_pipelined.ave", "fused_moe.ave",
                                  "flash_attention_gqa.ave", "gemm_mma_ldmatrix.ave"])
def test_enumerated_strides_equal_the_z3_ones(name, monkeypatch):
    path = ROOT / "examples" / name
    calls: list[int] = []
    by_z3 = derived_facts._strides_by_z3
    monkeypatch.setattr(derived_facts, "_strides_by_z3", lambda *args: calls.append(1) or by_z3(*args))
    enumerated = _stride_rows(path)
    enumerated_calls = len(calls)
    monkeypatch.setattr(derived_facts, "_lane_separable", lambda *args: False)  # every such access to Z3
    assert enumerated == _stride_rows(path)
    assert any(enumerated), "the example has no global access with strides: the test compares nothing"
    assert len(calls) > 2 * enumerated_calls, "the enumeration decided no access the Z3 path decides"


def _first_conflict_by_loop(words: np.ndarray, phase: int) -> tuple[int, int] | None:
    for row in range(words.shape[0]):
        for start in range(0, words.shape[1], phase):
            w = words[row, start:start + phase]
            banks = w % BANKS
            if any(np.unique(w[banks == b]).size > 1 for b in np.unique(banks)):
                return row, start
    return None


@pytest.mark.parametrize("seed", range(40))
def test_first_conflicting_phase_matches_a_loop(seed):
    rng = np.random.default_rng(seed)
    rows, lanes = int(rng.integers(1, 5)), int(rng.integers(1, 200))
    phase = int(rng.choice([8, 16, 32]))
    stride = int(rng.choice([1, 2, 4, 32, 33]))
    words = (np.arange(lanes)[None, :] * stride + rng.integers(-3, 3, size=(rows, 1)) * 64).astype(np.int64)
    if rng.random() < 0.5:  # a few random lanes moved: conflicts in some phases only
        hit = rng.integers(0, lanes, size=int(rng.integers(0, 3)))
        words[:, hit] += 32 * int(rng.integers(1, 4))
    assert _first_conflicting_phase(words, phase) == _first_conflict_by_loop(words, phase)
