"""Simulator throughput, and exhaustive shadow checking vs the symbolic check.

  python bench/simulate.py [--quick] [--exhaustive M:K ...] [--against REV [--rounds R]]

1. Throughput of the concrete simulator on the LDS-staged MFMA GEMM (examples/gemm_lds_mfma.ave)
   at 256^3 and 1024^3, with and without shadow tags: output elements/s and multiply-accumulates/s
   (the second run of each size in the process: a first run pays one-time costs).
2. The headline ratio: the time of an exhaustive shadow check (every block, thread, iteration and
   value, for one concrete size) against `ave check` (all sizes at once, symbolically), for
   growing grids and K (`--exhaustive 64:64 1024:1024` picks the M=N:K pairs). Ratios are
   measured in this process, so machine noise cancels out.

`--against REV` instead times part 1 for this tree and for a git revision (bench/revision.py),
alternating fresh processes of both so a busy machine slows both alike, and prints the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEMM = Path("examples") / "gemm_lds_mfma.ave"


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def warm_run(root: Path, n: int, shadow: bool) -> tuple[float, float, bool]:
    """Seconds (wall, then this process's CPU) of the second simulation of an n^3 GEMM in this
    process, and whether it matched. The simulator runs on one core, so on a busy machine its CPU
    seconds are close to what the wall clock would show on a quiet one."""
    from ave_decl.lang.source import SourceFile
    from ave_decl.sim.run import simulate_source

    src = SourceFile.read(root / GEMM)
    simulate_source(src, dict(M=n, N=n, K=n), shadow=shadow)
    cpu = time.process_time()
    secs, runs = timed(lambda: simulate_source(src, dict(M=n, N=n, K=n), shadow=shadow))
    return secs, time.process_time() - cpu, bool(runs[0][1].reference["ok"])


def throughput(sizes: list[int]) -> None:
    print("1. simulator throughput, gemm_lds_mfma (second run of each size)")
    for n in sizes:
        for shadow in (False, True):
            secs, cpu, ok = warm_run(ROOT, n, shadow)
            print(f"   {n}^3 {'shadow' if shadow else 'no shadow':9}: {secs:7.2f} s ({cpu:.2f} s CPU)   "
                  f"{n * n / secs:12,.0f} output elements/s   {n ** 3 / secs:14,.0f} MAC/s   "
                  f"reference {'ok' if ok else 'MISMATCH'}")


def exhaustive(pairs: list[tuple[int, int]]) -> None:
    import ave_decl
    from ave_decl.lang.source import SourceFile
    from ave_decl.sim.run import simulate_source

    print("2. exhaustive shadow check vs symbolic ave check (same kernel)")
    check_s, report = timed(lambda: ave_decl.check(ROOT / GEMM))
    check_s = min(check_s, timed(lambda: ave_decl.check(ROOT / GEMM))[0])
    print(f"   ave check: {check_s * 1000:.0f} ms, verdict {report.kernels[0].verdict.value} for all M, N, K")
    print(f"   {'M=N':>5} {'K':>5} {'threads':>8} {'shadow checks':>14} {'shadow s':>9} {'shadow/check':>13}")
    src = SourceFile.read(ROOT / GEMM)
    for mn, k in pairs:
        secs, runs = timed(lambda: simulate_source(src, dict(M=mn, N=mn, K=k), shadow=True))
        r = runs[0][1]
        checks = sum(f.checked for f in r.failures)
        threads = (mn // 64) ** 2 * 256
        ok = r.shadow_ok and r.reference["ok"]
        print(f"   {mn:5} {k:5} {threads:8} {checks:14,} {secs:9.2f} {secs / check_s:13.1f}"
              f"{'' if ok else '   (shadow or reference FAILED)'}")


def against(rev: str, sizes: list[int], rounds: int) -> None:
    from revision import revision_tree

    with revision_tree(rev) as tree:
        print(f"warm run of gemm_lds_mfma, median of {rounds} alternating fresh processes; "
              f"ratio = this tree's elements/s / {rev}'s")
        print(f"{'size':>6} {'shadow':>7} {'now s':>8} {rev[:8] + ' s':>11} {'speed-up':>9}   "
              f"{'now CPU s':>9} {rev[:8] + ' CPU s':>15} {'CPU speed-up':>13}")
        for n in sizes:
            for shadow in (False, True):
                secs: dict[str, list[float]] = {"now": [], "rev": []}
                cpu: dict[str, list[float]] = {"now": [], "rev": []}
                for _ in range(rounds):
                    for side, root in (("now", ROOT), ("rev", tree)):
                        env = {**os.environ, "PYTHONPATH": str(root)}
                        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(root),
                                              str(n), str(int(shadow))], capture_output=True, text=True, check=True,
                                             cwd=root, env=env)
                        got = json.loads(out.stdout)
                        secs[side].append(got["secs"])
                        cpu[side].append(got["cpu"])
                now, old = statistics.median(secs["now"]), statistics.median(secs["rev"])
                cnow, cold = statistics.median(cpu["now"]), statistics.median(cpu["rev"])
                print(f"{n:>5}³ {'yes' if shadow else 'no':>7} {now:8.2f} {old:11.2f} {old / now:9.1f}   "
                      f"{cnow:9.2f} {cold:15.2f} {cold / cnow:13.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for a smoke run)")
    ap.add_argument("--exhaustive", nargs="+", metavar="MN:K", help="the M=N:K sizes of part 2")
    ap.add_argument("--against", metavar="REV", help="time part 1 for this tree and for REV, alternating")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds with --against")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        root, n, shadow = Path(args.child[0]), int(args.child[1]), args.child[2] == "1"
        secs, cpu, ok = warm_run(root, n, shadow)
        print(json.dumps({"secs": secs, "cpu": cpu, "ok": ok}))
        return
    sys.path.insert(0, str(ROOT))
    sizes = [256] if args.quick else [256, 1024]
    if args.against:
        against(args.against, sizes, args.rounds)
        return
    throughput(sizes)
    if args.exhaustive:
        pairs = [tuple(int(x) for x in p.split(":")) for p in args.exhaustive]
    else:
        pairs = [(64, 64), (128, 128), (256, 256)] if args.quick else [(64, 64), (128, 128), (256, 256), (256, 512)]
    exhaustive(pairs)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
