"""Code-generation costs per example, and the host target against the simulator.

  python bench/emit.py [--repeat N] [--sim-repeat N]

1. For every example the nvptx target applies to: the time to lower and emit PTX (LLVM's NVPTX
   back end, in process) and the time of `ptxas -v` on that PTX (cubin), with the registers and
   spills ptxas reports. Skipped with the reason when ptxas is not installed.
2. For every example the amdgpu target applies to: the time to lower and emit gfx942 assembly
   (LLVM's AMDGPU back end, in process) and to link a code object with ld.lld (when installed),
   with VGPRs/AGPRs, LDS, scratch, spills and the MI300X occupancy estimate.
3. For every example with a reference: the host target (JIT compile, then one launch on the same
   random inputs `ave run` uses) against `ave simulate` (`simulate_source`, shadow off and on) on
   the same kernel and sizes, with the ratios simulate / host-run measured in this process. `ref`
   is the host output against the reference (gemm_lds_mfma_transposed is the violating example:
   DIFF is its expected answer).

Verification is skipped (`unverified=True`): this measures code generation, not the proof. The
machine is noisy: compare ratios within one run, not absolute times across runs. Never asserts.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ave_decl.codegen import CodegenError, ToolchainError, get_backend  # noqa: E402
from ave_decl.execute import compile_source, launch_kernel  # noqa: E402
from ave_decl.lang.errors import AveError  # noqa: E402
from ave_decl.lang.parser import parse_source  # noqa: E402
from ave_decl.lang.reference import reference_of  # noqa: E402
from ave_decl.lang.resolve import resolve_imports  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402

# Small sizes meeting each example's assume(...) and grid: seconds on the host, not minutes.
GEMM64 = dict(M=64, N=64, K=64)
SIZES: dict[str, dict[str, int]] = {
    "flash_attention_gqa": dict(S=64, H=4, HKV=1),
    "fused_moe": dict(T=32, E=2, EM=64, EB=2, N=64),
    "gemm_mma_pipelined": dict(M=128, N=128, K=64),
    "exchange_untagged": dict(N=64),
}


def sizes_of(kernel: str) -> dict[str, int]:
    return SIZES.get(kernel, GEMM64)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best(fn, repeat: int):
    """Minimum wall time of `repeat` calls (the least disturbed by the machine) and the last result."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        secs, out = timed(fn)
        times.append(secs)
    return min(times), out


def kernels_of(path: Path):
    src = SourceFile.read(path)
    module = parse_source(src)
    return src, module, resolve_imports(module)


def nvptx_section(examples: list[Path], repeat: int) -> None:
    print("1. nvptx: emit to PTX (lowering + LLVM NVPTX, in process) and ptxas -v (PTX -> cubin), sm_90a")
    try:
        nv = get_backend("nvptx")
    except AveError as exc:
        print(f"   skipped: {exc.message}")
        return
    from ave_nvptx import toolchain

    try:
        toolchain.locate("ptxas")
        have_ptxas = True
    except ToolchainError as exc:
        print(f"   ptxas: {exc.message} (PTX times only)")
        have_ptxas = False
    header = f"   {'example':26} {'kernel':22} {'ptx ms':>8} {'ptxas ms':>9} {'regs':>5} {'smem B':>7} {'spill st/ld B':>14}"
    print(header)
    for path in examples:
        src, module, imports = kernels_of(path)
        for k in module.kernels:
            reason = nv.applies(k, imports)
            if reason is not None:
                continue
            try:
                compile_source(src, "nvptx", stage="ptx", kernel=k.name, unverified=True)  # warm LLVM's target
                ptx_s, compiled = best(lambda: compile_source(src, "nvptx", stage="ptx", kernel=k.name,
                                                              unverified=True)[0], repeat)
            except CodegenError as exc:
                print(f"   {path.name:26} {k.name:22} codegen error: {exc.message}")
                continue
            cells = f"{ptx_s * 1e3:8.0f}"
            if have_ptxas:
                ptx = compiled.artifacts["ptx"].data
                ptxas_s, (_, res, _) = best(lambda: toolchain.assemble(ptx, compiled.arch), repeat)
                spills = f"{res.get('spill_stores', 0)}/{res.get('spill_loads', 0)}"
                cells += (f" {ptxas_s * 1e3:9.0f} {res.get('registers', '?'):>5} {res.get('shared_bytes', 0):>7}"
                          f" {spills:>14}")
            print(f"   {path.name:26} {k.name:22} {cells}")


def amdgpu_section(examples: list[Path], repeat: int) -> None:
    print("2. amdgpu: emit gfx942 assembly (lowering + LLVM AMDGPU, in process) and link a code object (ld.lld)")
    try:
        amd = get_backend("amdgpu")
    except AveError as exc:
        print(f"   skipped: {exc.message}")
        return
    from ave_amdgpu import toolchain

    problem = toolchain.linker_problem()
    if problem:
        print(f"   ld.lld: {problem} (assembly times only)")
    print(f"   {'example':26} {'kernel':22} {'asm ms':>7} {'ld.lld ms':>9} {'VGPR':>5} {'AGPR':>5} {'LDS B':>6}"
          f" {'scratch':>7} {'spills':>6} {'waves/SIMD':>10}")
    for path in examples:
        src, module, imports = kernels_of(path)
        for k in module.kernels:
            if amd.applies(k, imports) is not None:
                continue
            try:
                compile_source(src, "amdgpu", stage="asm", kernel=k.name, unverified=True)  # warm LLVM's target
                asm_s, c = best(lambda: compile_source(src, "amdgpu", stage="asm", kernel=k.name,
                                                       unverified=True)[0], repeat)
                hsaco = "-"
                if not problem:
                    obj = compile_source(src, "amdgpu", stage="obj", kernel=k.name, unverified=True)[0]
                    link_s, _ = best(lambda: toolchain.link(obj.artifacts["obj"].data), repeat)
                    hsaco = f"{link_s * 1e3:.0f}"
            except (CodegenError, ToolchainError) as exc:
                print(f"   {path.name:26} {k.name:22} error: {exc.message}")
                continue
            r = c.resources
            print(f"   {path.name:26} {k.name:22} {asm_s * 1e3:7.0f} {hsaco:>9} {r['vgprs']:>5} {r['agprs']:>5}"
                  f" {r['shared_bytes']:>6} {r['scratch_bytes']:>7} {r['vgpr_spills']:>6}"
                  f" {r['occupancy_waves_per_simd']:>10}")


def host_section(examples: list[Path], repeat: int, sim_repeat: int) -> None:
    from ave_decl.sim.reference import compare, evaluate_reference
    from ave_decl.sim.run import simulate_source

    host = get_backend("host")
    print("3. host target (one pthread per GPU thread) vs ave simulate (numpy, CPU) on the same kernel and sizes")
    print(f"   times in ms; host run = one launch of the JIT-compiled grid (best of {max(1, repeat)}); compile ="
          f" lower + O3 + JIT; sim = simulate_source after a warm-up call (best of {max(1, sim_repeat)})")
    header = (f"   {'kernel':24} {'sizes':26} {'compile':>8} {'host run':>9} {'ref':>4} {'sim':>9} {'sim/run':>8}"
              f" {'+shadow':>9} {'shadow/run':>10}")
    print(header)
    ratios, shadow_ratios = [], []
    for path in examples:
        src, module, imports = kernels_of(path)
        for k in module.kernels:
            ref = reference_of(k)
            if ref is None or host.applies(k, imports) is not None:
                continue
            sizes = sizes_of(k.name)
            compile_s, compiled = timed(lambda: compile_source(src, "host", stage="llir", kernel=k.name,
                                                               unverified=True)[0])
            prep_s, _ = timed(lambda: host.prepare(compiled))
            launch_kernel(host, compiled, k, sizes)  # warm-up: page faults, thread stacks
            runs = [launch_kernel(host, compiled, k, sizes) for _ in range(max(1, repeat))]
            run_s = min(r[2] for r in runs)
            inputs, outputs, _ = runs[-1]
            got = compare(outputs[ref.output], evaluate_reference(ref, inputs, sizes), ref.tolerance)
            at = ",".join(f"{n}={v}" for n, v in sizes.items())
            row = (f"   {k.name:24} {at:26} {(compile_s + prep_s) * 1e3:8.0f} {run_s * 1e3:9.1f}"
                   f" {'ok' if got['ok'] else 'DIFF':>4}")
            if sim_repeat > 0:
                cells = []
                for shadow in (False, True):
                    simulate_source(src, sizes, kernel=k.name, shadow=shadow)  # warm-up: first-touch allocations
                    sim_s, _ = best(lambda: simulate_source(src, sizes, kernel=k.name, shadow=shadow), sim_repeat)
                    cells.append(sim_s)
                ratios.append(cells[0] / run_s)
                shadow_ratios.append(cells[1] / run_s)
                row += (f" {cells[0] * 1e3:9.0f} {cells[0] / run_s:8.1f} {cells[1] * 1e3:9.0f}"
                        f" {cells[1] / run_s:10.1f}")
            print(row)
    if ratios:
        print(f"   geometric mean: sim/run {statistics.geometric_mean(ratios):.1f}x, "
              f"shadow/run {statistics.geometric_mean(shadow_ratios):.1f}x over {len(ratios)} kernels")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions (the minimum is printed)")
    ap.add_argument("--sim-repeat", type=int, default=1, help="timed simulator runs per mode (0: no simulator)")
    ap.add_argument("--only", choices=("nvptx", "amdgpu", "host"), default=None, help="one section")
    args = ap.parse_args()
    examples = sorted([*(ROOT / "examples").glob("*.ave"), *(ROOT / "examples").glob("speed/*.ave")])
    if args.only == "amdgpu":
        amdgpu_section(sorted([*examples, *(ROOT / "examples").glob("production/*.ave")]), args.repeat)
        return
    nvptx_section(examples, args.repeat)
    amdgpu_section(examples, args.repeat)
    host_section(examples, args.repeat, args.sim_repeat)


if __name__ == "__main__":
    main()
