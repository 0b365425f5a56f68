"""Kernels drawn for NVIDIA (mma.sync + ldmatrix) and for AMD (MFMA 32x32x8 / 16x16x16, LDS,
swizzles) that verify also run correctly on the host target, and the AMD ones compile for gfx942
with their MFMA and without spills; on mutants with a deterministic output (no race), the host
and the simulator agree on whether the output is right, so a bug the verifier flags shows on the
emitted code too."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import ave_decl
from ave_decl.codegen import get_backend
from ave_decl.execute import launch_kernel
from ave_decl.lang.parser import parse_text
from ave_decl.lang.resolve import resolve_imports
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.reference import compare, evaluate_reference, reference_of
from ave_decl.sim.run import simulate_source
from ave_decl.testing.mutate import mutants
from ave_decl.testing.strategies import gemm_kernels

FAMILIES = {"nvidia": gemm_kernels(naive=False).filter(lambda case: case.spec.nvidia),
            "amd": gemm_kernels(naive=False).filter(lambda case: not case.spec.nvidia)}
# Mutations whose wrong output does not depend on the schedule. Dropped barriers and waits make
# races: on the host (real threads) their outcome varies from run to run, so they are left out.
DETERMINISTIC = ["transpose_shared_read", "swap_lane_value", "wrong_k_offset", "wrong_accumulator_output",
                 "drop_block_offset", "ldmatrix_matrix_order", "off_by_one_stage", "swizzle_write_only"]


def host_ok(text: str, sizes: dict[str, int]) -> tuple[bool, dict]:
    module = parse_text(text, "fuzz.ave")
    k = module.kernels[0]
    backend = get_backend("host")
    compiled = backend.compile(k, resolve_imports(module))
    inputs, outputs, _ = launch_kernel(backend, compiled, k, sizes, seed=1)
    ref = reference_of(k)
    result = compare(outputs[ref.output], evaluate_reference(ref, inputs, sizes), ref.tolerance)
    return bool(result["ok"]), result


def amdgpu_compiles(text: str, instruction: str) -> None:
    """The kernel compiles for gfx942: its MFMA in the assembly, no spills, no scratch."""
    module = parse_text(text, "fuzz.ave")
    compiled = get_backend("amdgpu").compile(module.kernels[0], resolve_imports(module), None, "asm")
    assert f"v_mfma_f32_{instruction}_bf16" in compiled.artifacts["asm"].text
    r = compiled.resources
    assert r["vgpr_spills"] == 0 and r["scratch_bytes"] == 0, r


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=examples(1), deadline=None)
@given(data=st.data())
def test_kernels_that_verify_run_correctly_on_the_host(family, data):
    case = data.draw(FAMILIES[family])
    report = ave_decl.check(case.text, path="fuzz.ave", violation_sets=False)
    assert report.kernels[0].verdict == Verdict.VERIFIED, case.spec
    ok, result = host_ok(case.text, case.sizes)
    assert ok, (case.spec, result)
    if family == "amd":
        amdgpu_compiles(case.text, case.spec.instruction)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=examples(1), deadline=None)
@given(data=st.data())
def test_host_and_simulator_agree_on_deterministic_mutants(family, data):
    case = data.draw(FAMILIES[family])
    compared = 0
    for m in mutants(case.text, DETERMINISTIC):
        try:
            (_, sim), = simulate_source(SourceFile("m.ave", m.text), case.sizes, shadow=False, seed=1)
        except ave_decl.lang.errors.AveError:
            continue  # the mutant cannot run at these sizes (e.g. out of bounds): nothing to compare
        if sim.errors or sim.reference is None or "ok" not in sim.reference:
            continue
        ok, result = host_ok(m.text, case.sizes)
        compared += 1
        assert ok == bool(sim.reference["ok"]), (case.spec, m.operator, m.line, result, sim.reference)
        if not ok:
            assert result["mismatched"] > 0 and np.isfinite(result["max_abs"])
    assert compared >= 2, f"only {compared} mutants of {case.spec} could be compared"
