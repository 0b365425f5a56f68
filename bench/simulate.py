"""Simulator throughput, and exhaustive shadow checking vs the symbolic check.

  python bench/simulate.py [--quick]

1. Throughput of the concrete simulator on the LDS-staged MFMA GEMM (examples/gemm_lds_mfma.ave)
   at 256^3 and 1024^3, without shadow tags: output elements/s and multiply-accumulates/s.
2. The headline ratio: the time of an exhaustive shadow check (every block, thread, iteration and
   value, for one concrete size) against `ave check` (all sizes at once, symbolically), for
   growing grids and K. Ratios are measured in this process, so machine noise cancels out.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ave_decl  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402
from ave_decl.sim.run import simulate_source  # noqa: E402

GEMM = ROOT / "examples" / "gemm_lds_mfma.ave"


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for a smoke run)")
    args = ap.parse_args()
    src = SourceFile.read(GEMM)
    print("1. simulator throughput, gemm_lds_mfma, no shadow (second run of each size)")
    for n in ([256] if args.quick else [256, 1024]):
        simulate_source(src, dict(M=n, N=n, K=n), shadow=False)
        secs, runs = timed(lambda: simulate_source(src, dict(M=n, N=n, K=n), shadow=False))
        ok = runs[0][1].reference["ok"]
        print(f"   {n}^3: {secs:7.2f} s   {n * n / secs:12,.0f} output elements/s   "
              f"{n ** 3 / secs:14,.0f} MAC/s   reference {'ok' if ok else 'MISMATCH'}")
    print("2. exhaustive shadow check vs symbolic ave check (same kernel)")
    check_s, report = timed(lambda: ave_decl.check(GEMM))
    check_s = min(check_s, timed(lambda: ave_decl.check(GEMM))[0])
    print(f"   ave check: {check_s * 1000:.0f} ms, verdict {report.kernels[0].verdict.value} for all M, N, K")
    sizes = [(64, 64), (128, 128), (256, 256)] if args.quick else [(64, 64), (128, 128), (256, 256), (256, 512)]
    print(f"   {'M=N':>5} {'K':>5} {'threads':>8} {'shadow checks':>14} {'shadow s':>9} {'shadow/check':>13}")
    for mn, k in sizes:
        simulate_source(src, dict(M=mn, N=mn, K=k), shadow=True)  # JAX compiles once per shape: time warm runs
        secs, runs = timed(lambda: simulate_source(src, dict(M=mn, N=mn, K=k), shadow=True))
        r = runs[0][1]
        checks = sum(f.checked for f in r.failures)
        threads = (mn // 64) ** 2 * 256
        print(f"   {mn:5} {k:5} {threads:8} {checks:14,} {secs:9.2f} {secs / check_s:13.1f}")


if __name__ == "__main__":
    main()
