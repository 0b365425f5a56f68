"""The performance model's occupancy (issue 14, item 3): registers and shared memory per block
bound the resident threads, and too few resident threads stretch the memory time; the figures
come from the target backend's compile when it runs here, else from the kernel's text."""
from __future__ import annotations

import pytest
from conftest import EXAMPLES

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")

from ave_planner.model import devices, estimate  # noqa: E402
from ave_planner.occupancy import Resources, estimated, from_backend, occupancy  # noqa: E402

from ave_decl.lang.parser import parse_text  # noqa: E402

NAIVE = (EXAMPLES / "gemm_naive.ave").read_text()
SIZES = {"M": 4096, "N": 4096, "K": 4096}


def _with_registers(n: int) -> str:
    """The naive GEMM holding an extra register array of n f32 (each thread keeps it live)."""
    return NAIVE.replace("    acc = 0.0\n", f"    big = local(f32, ({n},), init=0)\n    acc = big[0]\n")


def test_the_text_estimate_counts_arrays_and_shared_buffers():
    k = parse_text(_with_registers(200), "k.ave").kernels[0]
    r = estimated(k)
    assert r.registers >= 200 and r.shared_bytes == 0 and r.source == "estimate"
    lds = parse_text((EXAMPLES / "gemm_lds_mfma.ave").read_text(), "l.ave").kernels[0]
    assert estimated(lds).shared_bytes == 2 * 64 * 32 * 2 * 2  # As and Bs, bf16


@pytest.mark.parametrize("device", ["mi300x", "h200"])
def test_occupancy_is_bound_by_the_scarcest_resource(device):
    dev = devices()[device]
    few = occupancy(Resources(16, 0, "estimate"), 256, dev)
    assert few.fraction == 1.0 and few.limit == "threads"
    regs = occupancy(Resources(255, 0, "estimate"), 256, dev)
    assert regs.limit == "registers" and regs.fraction < few.fraction
    shared = occupancy(Resources(16, dev["shared_per_unit"] // 2 + 1, "estimate"), 256, dev)
    assert shared.limit == "shared" and shared.blocks == 1


@pytest.mark.parametrize("device", ["mi300x", "h200"])
def test_register_pressure_stretches_a_memory_bound_kernel(device):
    lean, heavy = estimate(NAIVE, SIZES, device), estimate(_with_registers(400), SIZES, device)
    assert lean.occupancy["latency_factor"] == 1.0 and heavy.occupancy["latency_factor"] > 1.5
    assert heavy.seconds > 1.5 * lean.seconds


def test_the_backends_report_is_used_when_it_compiles_here():
    r = from_backend((EXAMPLES / "gemm_lds_mfma.ave").read_text(), "amdgpu")
    if r is None:
        pytest.skip("the amdgpu backend cannot compile here (no LLVM toolchain)")
    assert r.source == "amdgpu backend" and r.registers > 16 and r.shared_bytes == 16384
    assert estimate((EXAMPLES / "gemm_lds_mfma.ave").read_text(), SIZES, "mi300x", True).occupancy["source"] \
        == "amdgpu backend"
