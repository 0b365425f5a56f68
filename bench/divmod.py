"""Effect of the range-aware div/mod normalisation (ave_decl/solver/divmod.py) on `ave check`.

Checks every example and a fixed set of drawn GEMMs (the 16x16x16 / vector-copy shapes where
nested div/mod hurt most) with the normalisation off (the baseline) and on, alternating in this
process, and prints per-kernel medians, the on/off ratio and whether the verdicts agree. The
machine is noisy: read the ratios, not the absolute times.

Usage: python bench/divmod.py [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ave_decl  # noqa: E402
from ave_decl.solver import smt  # noqa: E402
from ave_decl.transform.gemm_templates import GemmSpec, render  # noqa: E402

DRAWN = {
    "drawn 16x16x16, 2 waves, vec2": GemmSpec(2, 1, 16, instruction="16x16x16", copy_width=2),
    "drawn 16x16x16, 4 waves, vec8, swizzled": GemmSpec(2, 2, 32, swizzle_a=(1, 0, 2), instruction="16x16x16",
                                                       copy_width=8),
    "drawn 32x32x8, 2 waves, coalesced": GemmSpec(1, 2, 32, copy_width=1),
}


def workloads() -> dict[str, str]:
    out = {p.stem: p.read_text() for p in sorted((ROOT / "examples").glob("*.ave"))}
    out.update({name: render(spec) for name, spec in DRAWN.items()})
    return out


def timed_check(text: str, normalise: bool) -> tuple[float, list[str]]:
    smt.NORMALISE_DIVMOD = normalise
    t0 = time.perf_counter()
    report = ave_decl.check(text, path="bench.ave", violation_sets=False)
    elapsed = time.perf_counter() - t0
    verdicts = [f"{f.invariant}:{f.location.line}:{f.verdict.value}" for k in report.kernels for f in k.findings]
    return elapsed, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    total = {False: 0.0, True: 0.0}
    print(f"{'kernel':44s} {'off (s)':>8s} {'on (s)':>8s} {'on/off':>7s}  verdicts")
    for name, text in workloads().items():
        times: dict[bool, list[float]] = {False: [], True: []}
        verdicts: dict[bool, list[str]] = {}
        timed_check(text, True)  # warm caches (rules, JIT of nothing here, Z3 context creation)
        for _ in range(args.repeat):
            for normalise in (False, True):
                elapsed, verdicts[normalise] = timed_check(text, normalise)
                times[normalise].append(elapsed)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        total[False] += off
        total[True] += on
        same = "same" if verdicts[False] == verdicts[True] else "DIFFERENT"
        print(f"{name:44s} {off:8.2f} {on:8.2f} {on / off:7.2f}  {same}")
    print(f"{'total':44s} {total[False]:8.2f} {total[True]:8.2f} {total[True] / total[False]:7.2f}")
    smt.NORMALISE_DIVMOD = True


if __name__ == "__main__":
    main()
