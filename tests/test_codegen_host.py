"""The host target: every example kernel runs at small sizes and matches its reference; the
emitted code's semantics are pinned by comparisons that a wrong lowering fails."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_support import EXAMPLES, EXPECTED_WRONG, SIZES, kernels_of, run_on

from ave_decl.codegen import CodegenError
from ave_decl.codegen.errors import LaunchFailed
from ave_decl.codegen.host import HostTarget
from ave_decl.codegen.host_backend import HostBackend
from ave_decl.lang.source import SourceFile
from ave_decl.sim.reference import compare
from ave_decl.sim.run import simulate_source

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.ave")) + sorted(EXAMPLES.glob("speed/*.ave"))


def test_every_example_kernel_has_host_sizes():
    names = {k.name for p in EXAMPLE_FILES for k in kernels_of(p)[1].kernels}
    assert names <= set(SIZES), f"give host-run sizes in tests/codegen_support.py for {sorted(names - set(SIZES))}"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_runs_on_the_host_and_matches_its_reference(path):
    _, module, _ = kernels_of(path)
    name = module.kernels[0].name
    result, _, outputs = run_on("host", path, SIZES[name])
    if result is None:  # no reference declared: it ran, every output is finite
        assert all(np.isfinite(v).all() for v in outputs.values())
        return
    if name in EXPECTED_WRONG:
        assert not result["ok"] and result["mismatched"] > 0, result
    else:
        assert result["ok"], result


NESTED_FILES = sorted(p for p in EXAMPLES.glob("*/*.ave") if p.parent.name != "speed")
NESTED_SIZES = {"production": {"S": 64}}  # two K/V pages; otherwise the smallest sizes the kernel admits
NESTED_WRONG = {"gemm_helpers_b_offset", "gemm_pipelined3_wait2", "fa_fwd_gfx942_pv_layout"}  # bugs ave check finds
NESTED_FAULTS = {"gemm_tail_unmasked_store": "out-of-bounds store to C"}  # the host's bounds checks stop them


@pytest.mark.parametrize("path", NESTED_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_nested_example_runs_on_the_host_as_in_the_simulator(path):
    """Helpers, packed data, subviews, buffer operations, lane exchanges, wave specialization and the
    production flash attention compile; the host matches the reference where the simulator does, and
    a barrier under a wave-dependent `if` compiles only on the verifier's proof that it is matched."""
    from ave_decl.codegen.uniform import barrier_under_warp_condition
    from ave_decl.execute import _verdicts
    from ave_decl.solver.sizes import complete_sizes

    src = SourceFile(str(path), path.read_text())
    (plan, *_) = complete_sizes(src, NESTED_SIZES.get(path.parent.name, {}), None)
    _, module, _ = kernels_of(path)
    proven = (barrier_under_warp_condition(module.kernels[0].body) is not None
              and _verdicts(src, 10.0)[module.kernels[0].name].barriers_proven)
    if path.stem in NESTED_FAULTS:
        with pytest.raises(LaunchFailed) as fault:
            run_on("host", path, plan.sizes)
        assert fault.value.message.startswith(NESTED_FAULTS[path.stem]) and fault.value.span is not None
        return
    result, _, outputs = run_on("host", path, plan.sizes, barriers_proven=proven)
    (_, sim), = simulate_source(src, plan.sizes, shadow=False)
    assert result is not None and sim.reference is not None
    if path.stem in NESTED_WRONG:
        assert not sim.reference["ok"]
        return
    assert result["ok"] and sim.reference["ok"], (result, sim.reference)
    for tensor, expected in sim.outputs.items():  # the same operations, up to summation order (and so bf16 roundings)
        agree = compare(outputs[tensor], expected, 1e-3)
        assert agree["ok"], (tensor, agree)


def test_scalar_kernels_are_bit_identical_to_the_simulator():
    """No warp operation, so the host computes the simulator's f32 operations in the same order."""
    path = EXAMPLES / "gemm_naive.ave"
    sizes = {"M": 32, "N": 48, "K": 40}
    (_, sim), = simulate_source(SourceFile(str(path), path.read_text()), sizes, shadow=False, seed=3)
    _, inputs, outputs = run_on("host", path, sizes, seed=3)
    assert all(np.array_equal(inputs[n], sim.inputs[n]) for n in inputs)
    assert np.array_equal(outputs["C"], sim.outputs["C"])


class SwappedFragmentRows(HostTarget):
    """A deliberately wrong lowering: ldmatrix delivers matrix 1 where matrix 0 belongs."""

    def ldmatrix(self, b, lm, row, lane):
        out = super().ldmatrix(b, lm, row, lane)
        if len(out) >= 4:
            out[0], out[2] = out[2], out[0]
            out[1], out[3] = out[3], out[1]
        return out


class SwappedAccumulatorSlots(HostTarget):
    """A deliberately wrong lowering: two result slots of every matrix instruction exchanged."""

    def mma(self, b, instr, dtype, a, bv, c, lane):
        out = super().mma(b, instr, dtype, a, bv, c, lane)
        out[0], out[1] = out[1], out[0]
        return out


def _broken(target_class) -> HostBackend:
    class Broken(HostBackend):
        def target(self, arch):
            return target_class()

    return Broken()


@pytest.mark.parametrize("example, target_class", [("gemm_mma_ldmatrix", SwappedFragmentRows),
                                                   ("gemm_mma_ldmatrix", SwappedAccumulatorSlots),
                                                   ("gemm_lds_mfma", SwappedAccumulatorSlots)])
def test_a_wrong_lowering_makes_the_comparison_fail(example, target_class):
    path = EXAMPLES / f"{example}.ave"
    good, _, _ = run_on("host", path, SIZES[example])
    bad, _, _ = run_on(_broken(target_class), path, SIZES[example])
    assert good["ok"] and not bad["ok"], (good, bad)


VECTOR_COPY = """from ave.nvidia import mma_m16n8k16_bf16
@kernel(grid=(M // 32,), block=32, warp=32, reference="C = A + 0")
def copy_rows(A: Tensor[bf16, (M, 64)], C: Tensor[f32, (M, 64)]):
    assume(M % 32 == 0)
    t = thread_id(0)
    S = shared(bf16, (32, 64), layout=LAYOUT)
    for q in range(8):
        for e in range(8):
            async_copy(S[t, OFFSET + 8 * q + e], A[block_id(0) * 32 + t, OFFSET + 8 * q + e])
    async_wait()
    syncthreads()
    for j in range(64):
        C[block_id(0) * 32 + t, j] = S[t, j]
"""


def vector_copy_kernel(layout: str = "row_major(32, 64)", offset: str = "0") -> str:
    return VECTOR_COPY.replace("LAYOUT", layout).replace("OFFSET", offset)


@pytest.mark.parametrize("layout, offset", [("row_major(32, 64)", "0"), ("swizzle(3, 3, 3) @ row_major(32, 64)", "0"),
                                            ("swizzle(3, 0, 3) @ row_major(32, 64)", "0"), ("row_major(32, 64)", "t % 1")])
def test_vector_copies_are_exact_whatever_the_layout(layout, offset):
    """One 16-byte copy when the run-time check finds 8 contiguous aligned elements on both sides,
    element copies otherwise (swizzle(3, 0, 3) scatters them): the result is the same."""
    result, _, _ = run_on("host", vector_copy_kernel(layout, offset), {"M": 64})
    assert result["ok"] and result["max_abs"] == 0.0, result


def test_ldmatrix_needs_a_provably_aligned_column():
    text = (EXAMPLES / "gemm_mma_ldmatrix.ave").read_text().replace("8 * (lane // 16)]", "lane // 16]")
    with pytest.raises(CodegenError) as err:
        run_on("host", text, SIZES["gemm_mma_ldmatrix"])
    assert "multiple of 8" in err.value.message and err.value.span is not None and err.value.span.line == 34


def test_ldmatrix_refuses_a_layout_that_splits_rows():
    text = (EXAMPLES / "gemm_mma_ldmatrix.ave").read_text().replace(
        "As = shared(bf16, (32, 16))", "As = shared(bf16, (32, 16), layout=swizzle(1, 0, 4) @ row_major(32, 16))")
    with pytest.raises(CodegenError, match="breaks aligned 8-element rows apart"):
        run_on("host", text, SIZES["gemm_mma_ldmatrix"])


def test_variables_take_the_kind_of_every_assignment():
    """`acc = 0` then `acc += a * b`: one f32 variable (an int slot would truncate the sum)."""
    text = (EXAMPLES / "gemm_naive.ave").read_text().replace("acc = 0.0", "acc = 0")
    result, _, _ = run_on("host", text, {"M": 16, "N": 16, "K": 8})
    assert result["ok"], result


def test_floor_division_and_modulo_follow_python_on_negative_values():
    text = """@kernel(grid=(1,), block=64, wave=64)
def neg(C: Tensor[f32, (64,)]):
    t = thread_id(0)
    x = t - 37
    C[t] = x // 5 + x % 5 + x // 8 + x % 8 + (x >> 2) + (-x) // 3
"""
    _, _, out = run_on("host", text, {})
    x = np.arange(64) - 37
    assert np.array_equal(out["C"], (x // 5 + x % 5 + x // 8 + x % 8 + (x >> 2) + (-x) // 3).astype(np.float32))


def test_an_element_type_without_code_generation_is_reported_at_its_parameter():
    text = (EXAMPLES / "gemm_naive.ave").read_text().replace("A: Tensor[f32, (M, K)]", "A: Tensor[fp8, (M, K)]")
    with pytest.raises(CodegenError) as err:
        run_on("host", text, {"M": 16, "N": 16, "K": 8})
    assert "fp8" in err.value.message and err.value.span.line == 6 and err.value.span.col == 16


def test_the_generic_mma_computes_in_the_operands_type():
    """`mma_m16n8k16` accepts f16 and bf16: bf16 operands must be multiplied as bf16."""
    text = (EXAMPLES / "gemm_mma_ldmatrix.ave").read_text().replace("mma_m16n8k16_bf16", "mma_m16n8k16")
    result, _, _ = run_on("host", text, SIZES["gemm_mma_ldmatrix"])
    assert result["ok"], result
