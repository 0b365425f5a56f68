"""Datalog engines on the core rules: per-kernel runs vs one batched run (kernel id as a column).

Prints wall times and ratios measured in this process; run `python bench/engines.py [--copies N]`.
Soufflé is measured when found on PATH or via AVE_SOUFFLE.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ave_decl.datalog.clingo_engine import ClingoEngine  # noqa: E402
from ave_decl.datalog.ruleset import load_rules  # noqa: E402
from ave_decl.datalog.souffle_engine import SouffleEngine, find_souffle  # noqa: E402
from ave_decl.facts.kernel_facts import merge  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402
from ave_decl.pipeline import front_end  # noqa: E402


def corpus(copies: int):
    sources = []
    for i in range(copies):
        for p in sorted((ROOT / "examples").glob("*.ave")):
            sources.append(SourceFile(f"{p.stem}_{i}.ave", p.read_text()))
    return front_end(sources).kernels


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--copies", type=int, default=25, help="copies of each example (4 examples each)")
    args = ap.parse_args()
    kernels = corpus(args.copies)
    prog = load_rules()
    engines = [("embedded", ClingoEngine(prog))]
    if find_souffle():
        engines.append(("souffle", SouffleEngine(prog)))
    print(f"{len(kernels)} kernels, {sum(len(r) for k in kernels for r in k.rows.values())} facts")
    results = {}
    for name, eng in engines:
        eng.run(merge(kernels[:1]))  # warm-up
        per = timed(lambda: [eng.run(merge([k])) for k in kernels])
        batch = timed(lambda: eng.run(merge(kernels)))
        results[name] = (per, batch)
        print(f"{name:9} per-kernel {per:7.3f} s ({per / len(kernels) * 1000:6.1f} ms/kernel)   "
              f"batched {batch:7.3f} s ({batch / len(kernels) * 1000:6.1f} ms/kernel)   "
              f"per-kernel/batched = {per / batch:5.2f}")
    if len(results) == 2:
        (ep, eb), (sp, sb) = results["embedded"], results["souffle"]
        print(f"embedded/souffle: per-kernel {ep / sp:.2f}, batched {eb / sb:.2f}")
    else:
        print("souffle: not found (set AVE_SOUFFLE or put it on PATH to compare)")


if __name__ == "__main__":
    main()
