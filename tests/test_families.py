"""Families of obligations (solver/families.py): queries equal up to integer constants are
anti-unified and proved once. The generalisation at each member's values is that member's
formula, a violated member keeps the family from proving anything, and the report is the one
the obligations give alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3

from ave_decl import check
from ave_decl.solver import families
from ave_decl.solver.families import AntiUnifier, Mismatch

ROOT = Path(__file__).resolve().parent.parent
PIPELINED_MMA = ROOT / "examples" / "speed" / "gemm_mma_pipelined.ave"


def _unifier(ctx: z3.Context):
    params: dict[tuple[int, ...], z3.ArithRef] = {}

    def param(values: tuple[int, ...]) -> z3.ArithRef:
        return params.setdefault(values, z3.Int(f"p{len(params)}", ctx))

    return AntiUnifier(ctx, param), params


def _instance(general: list[z3.BoolRef], params: dict, member: int) -> list[z3.BoolRef]:
    pairs = [(p, z3.IntVal(values[member], p.ctx)) for values, p in params.items()]
    return [z3.substitute(f, *pairs) if pairs else f for f in general]


def _equivalent(a: list[z3.BoolRef], b: list[z3.BoolRef]) -> bool:
    s = z3.Solver(ctx=a[0].ctx)
    s.add(z3.And(*a) != z3.And(*b))
    return s.check() == z3.unsat


def _generalised(members: list[list[z3.BoolRef]]) -> tuple[list[z3.BoolRef], dict]:
    """The generalisation and its parameters, each member checked to be its instance."""
    unifier, params = _unifier(members[0][0].ctx)
    general = unifier.generalise(members)
    for m, formulas in enumerate(members):
        assert _equivalent(_instance(general, params, m), formulas)
    return general, params


def test_constants_become_parameters_and_each_member_is_its_instance():
    ctx = z3.Context()
    x, y, w = (z3.Int(n, ctx) for n in "xyw")
    members = [
        [x + 2 * y == w, x < 136, (x + w) % 32 == 0],  # no constant term in the first sum
        [x + 2 * y + 8 == w, x < 136, (x + w + 8) % 32 == 0],
        [(x + 2 * y) + 16 == w, x < 136, (x + w + 16) % 32 == 0],  # nested sums are flattened
    ]
    general, params = _generalised(members)
    assert list(params) == [(0, 8, 16)]  # one parameter: the constant varies the same way everywhere
    assert general[1].eq(members[0][1])  # a formula all members share is the first member's


def test_numerals_in_comparisons_are_generalised():
    ctx = z3.Context()
    x = z3.Int("x", ctx)
    unifier, params = _unifier(ctx)
    general = unifier.generalise([[x < 8, x >= 0], [x < 16, x >= 0]])
    assert list(params) == [(8, 16)]
    assert _equivalent(_instance(general, params, 1), [x < 16, x >= 0])


@pytest.mark.parametrize("second", ["factor", "divisor", "structure", "length"])
def test_members_that_differ_elsewhere_than_in_linear_constants_do_not_fit(second):
    ctx = z3.Context()
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    first = [x * 4 + y == 3, x / 8 == y]
    other = {
        "factor": [x * 8 + y == 3, x / 8 == y],  # a parameter there would make the query non-linear
        "divisor": [x * 4 + y == 3, x / 16 == y],
        "structure": [x * 4 - y == 3, x / 8 == y],
        "length": [x * 4 + y == 3],
    }[second]
    unifier, _params = _unifier(ctx)
    with pytest.raises(Mismatch) as raised:
        unifier.generalise([first, other])
    assert raised.value.members == {1}


def test_a_condition_and_its_negation_become_a_polarity_parameter():
    """The two arms of a wave-specialised kernel pose the same queries under `c` and `not c`."""
    ctx = z3.Context()
    x, y, w = (z3.Int(n, ctx) for n in "xyw")
    members = [
        [w / 64 < 4, x + 8 == y],
        [z3.Not(w / 64 < 4), x + 16 == y],
        [z3.Not(w / 64 < 4), x + 24 == y],
    ]
    _general, params = _generalised(members)
    assert set(params) == {(1, 0, 0), (8, 16, 24)}  # the polarity: 1 where the condition stands


def test_a_negation_of_another_condition_does_not_fit():
    ctx = z3.Context()
    x = z3.Int("x", ctx)
    unifier, _params = _unifier(ctx)
    with pytest.raises(Mismatch) as raised:
        unifier.generalise([[x < 4], [z3.Not(x <= 4)]])
    assert raised.value.members == {1}


def test_production_attentions_two_arms_form_one_family_of_eight(monkeypatch):
    counts = _proved_families(monkeypatch)
    report = json.loads(_report(ROOT / "examples" / "production" / "fa_fwd_gfx942.ave"))
    assert report["kernels"][0]["verdict"] == "VERIFIED"
    assert counts.count(8) >= 36 + 8, "K pairing's 36 and K distinctness's 9 positions, one family per position"
    assert all(c in (0, 8) for c in counts)


def _report(path: Path) -> str:
    return json.dumps(check(str(path), violation_sets=False, confirm=True).to_json(timings=False), sort_keys=True)


def _proved_families(monkeypatch) -> list[int]:
    """How many members each family attempt proved (0: not proved), recorded from now on."""
    counts: list[int] = []
    family_proved = families.FamilyProofs._family_proved

    def counting(self, *args):
        covered = family_proved(self, *args)
        counts.append(len(covered))
        return covered

    monkeypatch.setattr(families.FamilyProofs, "_family_proved", counting)
    return counts


def test_the_unrolled_accumulators_are_proved_by_families_with_the_report_they_give_alone(monkeypatch):
    counts = _proved_families(monkeypatch)
    with_families = _report(PIPELINED_MMA)
    assert sum(1 for c in counts if c == 16) >= 27, "K pairing, K distinctness and stored tags: 9 families each"
    assert json.loads(with_families)["kernels"][0]["verdict"] == "VERIFIED"
    monkeypatch.setattr(families, "FAMILY_MIN", 10 ** 9)  # every obligation discharged alone
    assert _report(PIPELINED_MMA) == with_families


def test_one_wrong_accumulator_keeps_its_families_from_proving_and_its_violation_is_reported(monkeypatch, tmp_path):
    wrong = tmp_path / "wrong_accumulator.ave"
    text = PIPELINED_MMA.read_text()
    assert "acc13 = mma_m16n8k16_bf16(a1, b3, acc13)" in text
    wrong.write_text(text.replace("acc13 = mma_m16n8k16_bf16(a1, b3, acc13)",
                                  "acc13 = mma_m16n8k16_bf16(a1, b2, acc13)"))
    counts = _proved_families(monkeypatch)
    with_families = _report(wrong)
    assert 0 in counts, "a family with the wrong accumulator was attempted and did not prove"
    kernel = json.loads(with_families)["kernels"][0]
    assert kernel["verdict"] == "VIOLATION"
    assert any(f["verdict"] == "VIOLATION" and (f.get("replay") or {}).get("confirmed") for f in kernel["findings"])
    monkeypatch.setattr(families, "FAMILY_MIN", 10 ** 9)
    assert _report(wrong) == with_families


def _proved_disjunctions(monkeypatch) -> list[bool]:
    """Whether each disjunction of obligations (families.DISJUNCTIVE) attempted was proved."""
    outcomes: list[bool] = []
    prove_group = families.FamilyProofs._prove_group

    def recording(self, group):
        before = len(self._proved)
        prove_group(self, group)
        if len(group) >= 2:
            outcomes.append(len(self._proved) > before)

    monkeypatch.setattr(families.FamilyProofs, "_prove_group", recording)
    return outcomes


_BOUNDS = """
@kernel(grid=(M // 64,), block=64, wave=64)
def bounds(A: Tensor[f32, (M,)], C: Tensor[f32, (M,)]):
    assume(M % 64 == 0)
    t = thread_id(0)
    bm = block_id(0) * 64
    S = shared(f32, (256,))
    S[t] = A[bm + t]
    S[t + 64] = A[bm + t]
    S[t + 128] = A[bm + t]
    S[t + {last}] = A[bm + t]
    syncthreads()
    C[bm + t] = S[t] + S[t + 64] + S[t + 128] + S[t + {last}]
"""


@pytest.mark.parametrize("source", [PIPELINED_MMA, "in bounds", "one out of bounds"])
def test_bounds_proved_as_disjunctions_give_the_report_they_give_alone(source, monkeypatch, tmp_path):
    """The bounds obligations of one rule are proved several at a time, as one disjunction of
    their queries; where one is violated the disjunction is not proved and each obligation is
    decided alone, so the report (verdicts, counterexamples, query counts) is the same."""
    if isinstance(source, str):
        path = tmp_path / "bounds.ave"
        path.write_text(_BOUNDS.format(last=192 if source == "in bounds" else 193))
    else:
        path = source
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    outcomes = _proved_disjunctions(monkeypatch)
    together = _report(path)
    assert outcomes, "a disjunction was attempted"
    assert all(outcomes) == (source != "one out of bounds")
    verdicts = {f["invariant"]: f["verdict"] for f in json.loads(together)["kernels"][0]["findings"]
                if f["verdict"] == "VIOLATION"}
    assert ("ave/buffer-bounds" in verdicts) == (source == "one out of bounds")
    monkeypatch.setattr(families, "DISJUNCTIVE", frozenset())  # each obligation alone
    assert _report(path) == together
