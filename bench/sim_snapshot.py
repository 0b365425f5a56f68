"""Differential check of the simulator: does a change keep every result the same?

    python bench/sim_snapshot.py --against REV [--no-mutants]

Simulates every kernel file under examples/ and tests/data/ at its smallest admissible sizes
(with and without shadow tags), and every mutant of the mutation benchmark's workloads at its
sizes (shadow on), once with this tree and once with git revision REV (bench/revision.py), and
compares digests of everything a run reports: output bytes, write counts, every shadow failure
(counts, first failure, failing classes), races, errors, probes and the reference verdict.
Prints the runs that differ; exit 1 when any does. `--root DIR` (internal) prints one tree's
digests as JSON.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _digest(r) -> dict:
    """Everything a SimResult reports, as JSON (arrays as hashes of their bytes)."""
    import numpy as np

    def h(a) -> str:
        a = np.ascontiguousarray(a)
        return hashlib.sha256(str((a.dtype, a.shape)).encode() + a.tobytes()).hexdigest()[:16]

    return {"outputs": {k: h(v) for k, v in sorted(r.outputs.items())},
            "write_counts": {k: h(v) for k, v in sorted(r.write_counts.items())},
            "failures": [[f.invariant, f.line, f.failed, f.checked, f.first, f.classes] for f in r.failures],
            "errors": r.errors, "races": r.races, "probes": len(r.probes),
            "reference": None if r.reference is None else
            {k: v for k, v in r.reference.items() if k in ("ok", "max_abs", "rel", "why")}}


def _files(root: Path) -> list[Path]:
    return sorted(p for d in ("examples", "tests/data") for p in (root / d).rglob("*.ave"))


def snapshot(root: Path, with_mutants: bool) -> dict[str, object]:
    """This tree's digests: {run name: digest or the error it raised}."""
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "bench"))
    from ave_decl.lang.errors import AveError
    from ave_decl.lang.source import SourceFile
    from ave_decl.sim.run import simulate_source
    from ave_decl.solver.sizes import complete_sizes

    out: dict[str, object] = {}

    def run(name: str, src, sizes: dict, kernel: str | None, shadow: bool) -> None:
        try:
            runs = simulate_source(src, sizes, kernel=kernel, shadow=shadow)
            out[name] = [[k, _digest(r)] for k, r in runs]
        except (AveError, MemoryError, ValueError) as exc:  # the same refusal on both sides is no difference
            out[name] = f"{type(exc).__name__}: {exc}"

    for path in _files(root):
        rel = str(path.relative_to(root))
        src = SourceFile.read(path)
        try:
            plans = complete_sizes(src, {})
        except AveError as exc:
            out[rel] = f"sizes: {exc}"
            continue
        for plan in plans:
            for shadow in (True, False):
                run(f"{rel}:{plan.kernel}:{'shadow' if shadow else 'plain'}", src, plan.sizes, plan.kernel, shadow)
    if with_mutants:
        import mutants as bench_mutants  # bench/mutants.py of this tree
        from ave_decl.testing.mutate import mutants

        for wl in bench_mutants.workloads(False):
            text = wl.read_text()
            sizes = bench_mutants.WORKLOAD_SIZES.get(wl.stem, bench_mutants.SIZES)
            for m in mutants(text, None, first_only=False):
                name = f"{wl.relative_to(root)}~{m.operator}@{m.line}"
                run(name, SourceFile(name, m.text), sizes, None, True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", metavar="REV", help="compare this tree with git revision REV")
    ap.add_argument("--no-mutants", action="store_true", help="only the kernel files, not the mutants")
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.root:
        json.dump(snapshot(Path(args.root), not args.no_mutants), sys.stdout, sort_keys=True, default=str)
        return
    if not args.against:
        ap.error("give --against REV")
    sys.path.insert(0, str(ROOT / "bench"))
    from revision import revision_tree

    flags = ["--no-mutants"] if args.no_mutants else []
    with revision_tree(args.against) as tree:
        sides = {}
        for side, root in (("now", ROOT), (args.against, tree)):
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--root", str(root), *flags],
                                  capture_output=True, text=True, cwd=root,
                                  env={**os.environ, "PYTHONPATH": str(root)})
            if done.returncode:
                sys.exit(f"the {side} side failed:\n{done.stderr[-3000:]}")
            sides[side] = json.loads(done.stdout)
    now, old = sides["now"], sides[args.against]
    differ = sorted(k for k in now.keys() | old.keys() if now.get(k) != old.get(k))
    for k in differ:
        print(f"DIFFERS {k}\n  now: {json.dumps(now.get(k))[:600]}\n  {args.against}: {json.dumps(old.get(k))[:600]}")
    print(f"{len(now)} runs, {len(differ)} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
