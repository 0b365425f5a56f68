"""ave fuzz on the shipped transformations, and the catalogue's promises (bounded default profile)."""
from __future__ import annotations

import pytest
from conftest import ROOT, examples
from hypothesis import given, settings
from hypothesis import strategies as st

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source
from ave_decl.testing.fuzz import check_transformation
from ave_decl.testing.mutate import OPERATORS, mutants
from ave_decl.testing.strategies import GemmSpec, KernelCase, attention_kernels, gemm_kernels, render
from ave_decl.transform.catalogue import CATALOGUE, MUTATIONS

TRANSFORMS = ROOT / "examples" / "transforms" / "swizzle_shared.py"


def test_fuzz_finds_and_shrinks_the_broken_transformation(tmp_path, ave):
    out = tmp_path / "failures"
    r = ave("fuzz", "--transform", f"{TRANSFORMS}:broken", "--out", out)
    assert r.code == 1 and "FAILURE (verify)" in r.out
    # shrunk to the smallest kernel of the family
    assert "GemmSpec(waves_m=1, waves_n=1, k_tile=8, swizzle_a=None, swizzle_b=None" in r.out
    assert (out / "failure.txt").read_text().startswith("kind: verify")
    # the written files reproduce: the input verifies, the transformed kernel does not
    assert ave_decl.check(out / "input.ave").kernels[0].verdict == Verdict.VERIFIED
    assert ave_decl.check(out / "output.ave", violation_sets=False).kernels[0].verdict == Verdict.VIOLATION


def test_fuzz_finds_nothing_in_the_correct_transformation(tmp_path, ave):
    r = ave("fuzz", "--transform", f"{TRANSFORMS}:correct", "--examples", "1", "--out", tmp_path / "none")
    assert r.code == 0 and r.out.startswith("ok: no failure in 1 kernels")
    assert not (tmp_path / "none").exists()


SIMULATED = sorted(set(CATALOGUE) - {"unroll_constant_loops"})


@pytest.mark.parametrize("source, expected", [
    ("def rewrite(m)\n    return m\n", "bad_pass.py:1:15: expected ':'"),
    ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
    ("rewrite = 3\n", "is not a function"),
])
def test_fuzz_reports_an_unloadable_transformation_in_one_line(tmp_path, ave, source, expected):
    (tmp_path / "bad_pass.py").write_text(source)
    r = ave("fuzz", "--transform", f"{tmp_path / 'bad_pass.py'}:rewrite")
    assert r.code == 2 and "Traceback" not in r.out + r.err
    assert expected in r.err and len(r.err.strip().splitlines()) == 1, r.err


@pytest.mark.parametrize("name", SIMULATED)
@settings(max_examples=examples(2), deadline=None)
@given(case=gemm_kernels(naive=False))
def test_catalogue_transformation_preserves_semantics_and_verdicts(name, case):
    assert check_transformation(case, CATALOGUE[name], simulate=True) is None


APPLIES_TO = {  # a drawn kernel each transformation rewrites, and a line of its output
    "xor_swizzle_shared": (GemmSpec(1, 1, 8), "As[i // 8, i % 8 ^ i // 8 % 8]"),
    "pipeline_k_loop": (GemmSpec(2, 1, 16, k_tiles=2), "async_copy(As[1 - st, "),
    "pipeline_k_loop_3_stages": (GemmSpec(1, 1, 8), "async_copy(As[(st + 2) % 3, i // 8, i % 8], "
                                 "A[bm + i // 8, kt + 16 + i % 8])"),
    "vectorize_copies": (GemmSpec(2, 2, 32, copy_width=1), "i = (e // 8 * 256 + t) * 8 + e % 8"),
    "split_k_tile": (GemmSpec(1, 2, 32, swizzle_a=(1, 0, 3), copy_width=4),
                     "As = shared(bf16, (32, 16), layout=swizzle(1, 0, 3) @ row_major(32, 16))"),
    "mfma_32x32x8_to_16x16x16": (GemmSpec(1, 1, 16), "c11 = mfma_f32_16x16x16_bf16(a, b, c11)"),
    "unroll_constant_loops": (GemmSpec(1, 1, 8), "a[3] = As[wm * 32 + lane % 32, s * 8 + lane // 32 * 4 + 3]"),
}


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue_transformation_applies_to_the_drawn_family(name):
    spec, line = APPLIES_TO[name]
    out = printer.module(CATALOGUE[name](parse_text(render(spec))))
    assert line in out, out


def test_pipelining_stages_ldmatrix_operands():
    """The NVIDIA family pipelined: ldmatrix reads a 3-D (stage, row, column) shared buffer."""
    spec = GemmSpec(1, 2, 16, k_tiles=2, instruction="m16n8k16", copy_width=1)
    case = KernelCase(spec, render(spec), parse_text(render(spec)))
    assert "ldmatrix_x4(As[st, " in printer.module(CATALOGUE["pipeline_k_loop"](case.module))
    assert check_transformation(case, CATALOGUE["pipeline_k_loop"], simulate=True) is None


def test_vectorize_copies_only_moves_per_thread_independent_copies():
    """A copy that also reads a register (per-thread data) must keep its thread -> element map."""
    src = """@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[f32, (256,)], B: Tensor[f32, (256,)]):
    t = thread_id(0)
    r = local(f32, (4,), init=0)
    for e in range(4):
        i = e * 64 + t
        B[i] = A[i] + r[0]
    for e in range(4):
        j = e * 64 + t
        B[j] = A[j]
"""
    out = printer.module(CATALOGUE["vectorize_copies"](parse_text(src)))
    assert "i = e * 64 + t" in out and "j = (e // 4 * 64 + t) * 4 + e % 4" in out, out


def test_transformations_leave_other_kernels_unchanged():
    module = parse_text((ROOT / "examples" / "flash_attention_gqa.ave").read_text())
    for name in ("pipeline_k_loop", "pipeline_k_loop_3_stages", "split_k_tile", "mfma_32x32x8_to_16x16x16",
                 "vectorize_copies"):
        assert CATALOGUE[name](module) == module, name


def test_unrolling_preserves_verdicts():
    spec = GemmSpec(1, 1, 8)
    case = KernelCase(spec, render(spec), parse_text(render(spec)))
    assert check_transformation(case, CATALOGUE["unroll_constant_loops"], simulate=False) is None


def test_mutations_are_caught():
    spec = GemmSpec(1, 1, 32)  # square 32x32 A tile: every mutation applies
    case = KernelCase(spec, render(spec), parse_text(render(spec)))
    for name, mutate in MUTATIONS.items():
        failure = check_transformation(case, mutate, simulate=True)
        assert failure is not None, name


@settings(max_examples=examples(3), deadline=None)
@given(gemm_kernels(), st.sampled_from([None, *sorted(MUTATIONS)]))
def test_verified_generated_kernels_pass_the_shadow_check(case, mutation):
    """Soundness on generated kernels (and their mutants): VERIFIED implies that the simulator's
    exhaustive shadow check (of one block), bounds and the race detector all pass."""
    module = case.module if mutation is None else MUTATIONS[mutation](case.module)
    text = printer.module(module)
    report = ave_decl.check(text, path="generated.ave", violation_sets=False)
    if report.kernels[0].verdict != Verdict.VERIFIED:
        return
    ((_, r),) = simulate_source(SourceFile("generated.ave", text), case.sizes, block_prefix=(0, 0, 0))
    assert r.shadow_ok and not r.errors and not r.races, (mutation, case.spec)


@settings(max_examples=examples(3), deadline=None)
@given(gemm_kernels(naive=False), st.data())
def test_every_counterexample_of_generated_mutants_replays(case, data):
    """A mutation operator at one of its sites in a drawn kernel: every error-severity
    counterexample the verifier reports is replayed by the simulator and confirmed."""
    found = [m for op in sorted(OPERATORS) for m in mutants(case.text, [op], first_only=False)]
    mutant = data.draw(st.sampled_from(found), label="mutant")
    report = ave_decl.check(mutant.text, path="mutant.ave", confirm=True, violation_sets=False)
    for k in report.kernels:
        for f in k.findings:
            if f.verdict == Verdict.VIOLATION and f.severity == "error" and f.counterexample is not None:
                assert f.replay and f.replay["confirmed"], (case.spec, mutant.operator, f.invariant, f.message,
                                                            f.replay)


@settings(max_examples=examples(1), deadline=None)  # ~18 s per example on 2 cores; the long profile draws 60
@given(attention_kernels(), st.data())
def test_generated_attention_kernels_and_mutants_agree_with_the_simulator(case, data):
    """The attention family (row statistics, head mapping, P through shared memory), as drawn or
    with one mutation: VERIFIED implies the simulator's shadow check, bounds and race detector
    pass; every error counterexample replays."""
    found = [None] + [m for op in sorted(OPERATORS) for m in mutants(case.text, [op], first_only=False)]
    mutant = data.draw(st.sampled_from(found), label="mutant")
    text = case.text if mutant is None else mutant.text
    report = ave_decl.check(text, path="attention.ave", confirm=True, violation_sets=False)
    (k,) = report.kernels
    if k.verdict == Verdict.VERIFIED:
        ((_, r),) = simulate_source(SourceFile("attention.ave", text), case.sizes)
        assert r.shadow_ok and not r.errors and not r.races, (case.spec, mutant)
    for f in k.findings:
        if f.verdict == Verdict.VIOLATION and f.severity == "error" and f.counterexample is not None:
            assert f.replay and f.replay["confirmed"], (case.spec, mutant.operator if mutant else None, f.message)
