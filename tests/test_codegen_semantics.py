"""Corner cases where the emitted code must compute what the simulator computes (tests/data/codegen/,
from a review of the code generator): each kernel runs on both, every output compared exactly."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_support import run_on
from conftest import DATA

from ave_decl.codegen import CodegenError
from ave_decl.lang.source import SourceFile
from ave_decl.sim.run import simulate_source

KERNELS = DATA / "codegen"


@pytest.mark.parametrize("name, sizes", [
    ("int_min_by_minus_one", {"n": 1}),  # INT_MIN // -1: a trap (SIGFPE) on x86 if it reached sdiv
    ("wide_shifts", {}),  # counts >= 32 are poison in LLVM
    ("loop_variable_reused_as_data", {"n": 5}),  # the loop's i32 slot must not truncate the later f32 i
    ("unrolled_variable_reassigned", {}),
    ("shared_inside_if", {"n": 5}),  # the array's pointer must dominate its uses
    ("float_floor_divmod", {}),  # numpy's divmod: 1.0 // 0.1 == 9
    ("warp_uniform_warp_operations", {}),  # lane reductions and shuffles under `if warp_id() < 2`
])
def test_host_computes_what_the_simulator_computes(name, sizes):
    path = KERNELS / f"{name}.ave"
    (_, sim), = simulate_source(SourceFile(str(path), path.read_text()), sizes, shadow=False)
    _, _, host = run_on("host", path, sizes)
    for tensor, expected in sim.outputs.items():
        assert np.array_equal(host[tensor], expected, equal_nan=True), (tensor, host[tensor], expected)


def test_integer_input_tensors_hold_integers():
    result, inputs, _ = run_on("host", KERNELS / "integer_input_tensor.ave", {})
    assert np.array_equal(inputs["X"], np.round(inputs["X"])) and np.abs(inputs["X"]).max() >= 1
    assert result["ok"] and result["max_abs"] == 0.0, result


@pytest.mark.parametrize("name, what, where", [
    ("divergent_barrier", "syncthreads()", "`if` of line 4"),
    ("divergent_lane_max", "lane_max()", "`if` of line 5"),
    ("control_dependent_barrier", "syncthreads()", "`if` of line 7"),  # x differs because it is assigned under t < 5
    ("thread_trip_count_shuffle", "shuffle_xor()", "loop of line 5"),
    ("slot_reduction_condition", "syncthreads()", "`if` of line 8"),  # reduce_max(s) of per-thread data
])
def test_a_barrier_or_warp_operation_under_a_divergent_if_is_refused(name, what, where):
    with pytest.raises(CodegenError) as err:
        run_on("host", KERNELS / f"{name}.ave", {}, barriers_proven=True)  # a proof of matched barriers is no help
    assert err.value.message.startswith(f"{what} inside the {where}, whose ") and err.value.span is not None
    assert "may differ between threads" in err.value.message


def test_a_coordinate_outside_its_extent_is_a_fault_even_inside_the_tensor():
    """C[t, 8] of a (4, 8) tensor lands on row t + 1 for t < 3: inside the memory, outside the
    shape. The host checks every coordinate, as the verifier's bounds invariants read them."""
    from ave_decl.codegen.errors import LaunchFailed

    with pytest.raises(LaunchFailed) as fault:
        run_on("host", KERNELS / "coordinate_out_of_bounds.ave", {})
    assert fault.value.message.startswith("out-of-bounds store to C") and fault.value.span.line == 7


def test_emit_to_a_directory_is_a_one_line_usage_error(ave, tmp_path):
    r = ave("emit", KERNELS / "wide_shifts.ave", "--target", "host", "--unverified", "-o", tmp_path)
    assert r.code == 2 and r.err.strip() == f"error: cannot write {tmp_path}: it is a directory"
    assert list(tmp_path.iterdir()) == []
