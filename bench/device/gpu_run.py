"""The GPU check of a backend on its GPU: nvptx on an H200 (bench/device/h200.sh), amdgpu on an
MI300X (bench/device/mi300x.sh); run by those scripts after the installs.

  python bench/device/gpu_run.py [--target nvptx|amdgpu] [--budget S] [--quick]

1. Correctness: every example the target applies to, at several sizes, through
   `ave_decl.execute.run_source(..., target=T, unverified=True)` (the verifier's gate is tested
   on the CPU; here it would spend a minute of the budget per file); prints ok / max error
   against the reference (host-side launch time includes the copies).
2. Speed: a bf16 GEMM (f32 accumulate, f32 output) at 4096^3 and 8192^3 with the target's
   fastest GEMM example timed between GPU events by the backend's `launch.run_timed`, against
   the vendor library through torch (cuBLAS / hipBLASLt: `torch.mm(..., out_dtype=torch.float32)`,
   else `torch.matmul`, bf16 output) on the same inputs; prints TFLOP/s and ours / theirs.

Results also go to $OUT/<target>_results.json when $OUT is set. Without a GPU it stops at once
with the reason (exit 2, as `ave run --target T` does); a failed example never stops the others.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ave_decl.codegen import get_backend  # noqa: E402
from ave_decl.execute import compile_source, run_source  # noqa: E402
from ave_decl.lang.errors import AveError  # noqa: E402
from ave_decl.lang.parser import parse_source  # noqa: E402
from ave_decl.lang.resolve import resolve_imports  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402

# Sizes per kernel meeting its assume(...): a small one, odd multiples, one large. A kernel not
# listed runs at the smallest sizes its assume(...) admits (ave_decl.solver.sizes).
CHECK_SIZES: dict[str, list[dict[str, int]]] = {
    "gemm_naive": [dict(M=64, N=64, K=64), dict(M=48, N=80, K=33), dict(M=512, N=512, K=512)],
    "gemm_mma_ldmatrix": [dict(M=32, N=16, K=16), dict(M=96, N=48, K=80), dict(M=1024, N=1024, K=1024)],
    "gemm_mma_pipelined": [dict(M=128, N=128, K=32), dict(M=256, N=384, K=96), dict(M=1024, N=1024, K=1024)],
    "exchange_untagged": [dict(N=64), dict(N=4096), dict(N=262144)],
    "gemm_lds_mfma": [dict(M=64, N=64, K=64), dict(M=192, N=320, K=128), dict(M=1024, N=1024, K=1024)],
    "gemm_mfma16": [dict(M=64, N=64, K=64), dict(M=1024, N=1024, K=1024)],
    "gemm_pipelined": [dict(M=64, N=64, K=64), dict(M=1024, N=1024, K=1024)],
    "gemm_mfma_mi300x": [dict(M=256, N=128, K=32), dict(M=512, N=384, K=96), dict(M=1024, N=1024, K=1024)],
}
QUICK = {k: v[:1] for k, v in CHECK_SIZES.items()}
# per target: its GEMM for the speed step (fastest first) and the install hint
GEMMS = {"nvptx": ("speed/gemm_mma_pipelined.ave", "gemm_mma_ldmatrix.ave"),
         "amdgpu": ("speed/gemm_mfma_mi300x.ave", "gemm_lds_mfma.ave")}
INSTALL = {"nvptx": "pip install -e backends/nvptx[toolchain,cuda]", "amdgpu": "pip install -e backends/amdgpu[hip]"}
LAUNCH_STAGE = {"nvptx": None, "amdgpu": "hsaco"}
GEMM_SIZES = (4096, 8192)
REPEATS = 10


class Clock:
    """The time left of the budget the shell script gives (so the whole check fits its limit)."""

    def __init__(self, budget_s: float) -> None:
        self.end = time.monotonic() + budget_s

    def left(self) -> float:
        return self.end - time.monotonic()


def emit(results: dict, target: str) -> None:
    out = os.environ.get("OUT")
    if out:
        path = Path(out) / f"{target}_results.json"
        path.write_text(json.dumps(results, indent=2, default=str))
        print(f"results written to {path}")


def device_problem(target: str) -> str | None:
    try:
        backend = get_backend(target)
    except AveError as exc:
        return f"the {target} backend is not installed: {exc.message} ({INSTALL[target]})"
    return backend.device_available()


def smallest_sizes(src: SourceFile, kernel: str) -> list[dict[str, int]]:
    from ave_decl.solver.sizes import complete_sizes

    try:
        return [plan.sizes for plan in complete_sizes(src, {}, kernel)]
    except AveError:
        return []


def check_examples(clock: Clock, sizes_of: dict[str, list[dict[str, int]]], target: str) -> list[dict]:
    backend = get_backend(target)
    rows = []
    print(f"1. correctness: {target} examples on the GPU against their references (f32 accumulation)")
    for path in sorted([*(ROOT / "examples").glob("*.ave"), *(ROOT / "examples").glob("*/*.ave")]):
        src = SourceFile.read(path)
        module = parse_source(src)
        imports = resolve_imports(module)
        for k in module.kernels:
            if backend.applies(k, imports) is not None:
                continue
            for sizes in sizes_of.get(k.name) or smallest_sizes(src, k.name):
                if clock.left() < 60:
                    rows.append({"kernel": k.name, "sizes": sizes, "status": "skipped: time budget"})
                    print(f"   {k.name}: skipped (time budget)")
                    continue
                row: dict = {"kernel": k.name, "file": path.name, "sizes": sizes}
                at = ",".join(f"{n}={v}" for n, v in sizes.items())
                try:
                    r = run_source(src, target, sizes, kernel=k.name, unverified=True)[0]
                    row.update(status="ok" if r.ok else "no-reference" if r.ok is None else "MISMATCH",
                               compile_s=r.compile_s, run_s=r.run_s, comparison=r.comparison)
                    c = r.comparison
                    err = (f"max abs error {c['max_abs']:.3g}, relative {c['rel']:.3g}, {c['mismatched']} of "
                           f"{c['elements']} differ") if c else "no reference declared"
                    print(f"   {row['status']:12} {k.name:20} {at:22} {err}; compile {r.compile_s:.2f} s, "
                          f"run {r.run_s * 1e3:.1f} ms")
                except AveError as exc:
                    row.update(status="ERROR", error=f"{exc.kind}: {exc.message}")
                    print(f"   {'ERROR':12} {k.name:20} {at:22} {exc.kind}: {exc.message}")
                except Exception as exc:  # noqa: BLE001  (report and go on to the next size)
                    row.update(status="ERROR", error=f"{type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc(limit=4))
                    print(f"   {'ERROR':12} {k.name:20} {at:22} {type(exc).__name__}: {exc}")
                rows.append(row)
    return rows


def gemm_example(target: str) -> Path:
    return next(p for p in (ROOT / "examples" / name for name in GEMMS[target]) if p.exists())


def bf16_bits(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    import ml_dtypes

    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def cublas(a_bits: np.ndarray, b_bits: np.ndarray) -> tuple[np.ndarray | None, float | None, str]:
    """cuBLAS through torch on the same bf16 bits: (f32 result, mean seconds, what was timed)."""
    try:
        import torch
    except ImportError as exc:
        return None, None, f"torch not installed ({exc})"
    if not torch.cuda.is_available():
        return None, None, f"torch {torch.__version__} sees no CUDA device (a CPU build, or a driver too old for it)"
    a = torch.from_numpy(a_bits.view(np.int16)).cuda().view(torch.bfloat16)
    b = torch.from_numpy(b_bits.view(np.int16)).cuda().view(torch.bfloat16)
    what = f"torch {torch.__version__} torch.mm(bf16, bf16, out_dtype=float32)"
    try:
        fn = lambda: torch.mm(a, b, out_dtype=torch.float32)  # noqa: E731
        fn()
    except (TypeError, RuntimeError):
        what = f"torch {torch.__version__} torch.matmul(bf16, bf16) (bf16 output: no out_dtype in this torch)"
        fn = lambda: torch.matmul(a, b)  # noqa: E731
    for _ in range(3):
        out = fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPEATS):
        out = fn()
    stop.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(stop) / 1000.0 / REPEATS
    return out.float().cpu().numpy(), seconds, what


def time_gemm(clock: Clock, sizes: tuple[int, ...], target: str) -> list[dict]:
    import importlib

    from ave_decl.sim.reference import compare

    run_timed = importlib.import_module(f"ave_{target}.launch").run_timed
    path = gemm_example(target)
    print(f"2. speed: bf16 GEMM with {path.name} against the vendor BLAS, mean of {REPEATS} launches "
          "between GPU events")
    src = SourceFile.read(path)
    stage = LAUNCH_STAGE[target]
    if target == "nvptx":
        from ave_nvptx.toolchain import ToolchainError, locate

        try:
            locate("ptxas")
            stage = "cubin"
        except ToolchainError:
            stage = "ptx"
    compiled = compile_source(src, target, stage=stage, unverified=True)[0]
    if compiled.resources:
        print(f"   {compiled.name}: {compiled.resources}")
    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        if clock.left() < 45:
            rows.append({"n": n, "status": "skipped: time budget"})
            print(f"   {n}^3: skipped (time budget)")
            continue
        row: dict = {"kernel": compiled.name, "n": n, "resources": compiled.resources}
        try:
            a, b = bf16_bits(rng, (n, n)), bf16_bits(rng, (n, n))
            arrays = {"A": a, "B": b, "C": np.zeros((n, n), np.float32)}
            out, ours_s = run_timed(compiled, arrays, dict(M=n, N=n, K=n), repeats=REPEATS)
            flops = 2.0 * n ** 3
            row.update(ours_s=ours_s, ours_tflops=flops / ours_s / 1e12)
            ref, theirs_s, what = cublas(a, b)
            row["cublas"] = what
            line = f"   {n}^3: ours {ours_s * 1e3:8.2f} ms {row['ours_tflops']:7.1f} TFLOP/s"
            if theirs_s is not None:
                row.update(cublas_s=theirs_s, cublas_tflops=flops / theirs_s / 1e12)
                row["ratio"] = row["ours_tflops"] / row["cublas_tflops"]
                agree = compare(out["C"], ref.astype(np.float64))
                row["vs_cublas"] = {k: agree[k] for k in ("ok", "max_abs", "rel")}
                line += (f" | cuBLAS {theirs_s * 1e3:8.2f} ms {row['cublas_tflops']:7.1f} TFLOP/s | ours/cuBLAS "
                         f"{row['ratio']:.3f} | max rel difference {agree['rel']:.2g}")
            else:
                line += f" | cuBLAS: {what}"
            row["status"] = "ok"
            print(line)
        except Exception as exc:  # noqa: BLE001  (report and go on)
            row.update(status="ERROR", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=4))
            print(f"   {n}^3: ERROR {type(exc).__name__}: {exc}")
        rows.append(row)
    if any("cublas" in r for r in rows):
        print(f"   cuBLAS yardstick: {next(r['cublas'] for r in rows if 'cublas' in r)}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=float(os.environ.get("AVE_H200_BUDGET_S", 360)),
                    help="seconds this driver may take (steps that do not fit are skipped)")
    ap.add_argument("--quick", action="store_true", help="one size per example, 4096^3 only")
    ap.add_argument("--target", choices=sorted(GEMMS), default="nvptx", help="the backend to check")
    args = ap.parse_args()
    clock = Clock(args.budget)
    results: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "budget_s": args.budget, "target": args.target}
    problem = device_problem(args.target)
    if problem is not None:
        results["status"] = "no-device"
        results["reason"] = problem
        print(f"no GPU: {problem}", file=sys.stderr)
        print(f"nothing was run: this check needs a GPU that target {args.target} launches on", file=sys.stderr)
        emit(results, args.target)
        return 2
    results["checks"] = check_examples(clock, QUICK if args.quick else CHECK_SIZES, args.target)
    results["gemm"] = time_gemm(clock, GEMM_SIZES[:1] if args.quick else GEMM_SIZES, args.target)
    bad = [r for r in results["checks"] if r.get("status") in ("MISMATCH", "ERROR")]
    bad += [r for r in results["gemm"] if r.get("status") == "ERROR"]
    results["status"] = "failures" if bad else "ok"
    print(f"{len(results['checks'])} checks, {len(bad)} failing; {clock.left():.0f} s of the budget left")
    emit(results, args.target)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
