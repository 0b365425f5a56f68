"""Batch-audit throughput on a generated corpus of kernel variants (correct and mutated).

  python bench/audit.py [--variants 1000] [--keep DIR] [--dask [--slices 10] [--subset 60]] [--memo]

Generates variants of the example kernels (renamed kernels, shifted index constants that keep
or break the invariants), then prints kernels/s for -j1 and -j2, cold and warm cache, batched vs
one-fixpoint-per-kernel, and the per-phase breakdown. With --dask (needs ave-decl[dask]) it
prints instead kernels/s for -j2 against a Dask LocalCluster of 2 worker processes (the ratio is
the overhead of Dask on one machine; slices of the corpus alternate between the two), then the
same with chunks of 4 and 1 kernels on a subset, which is what each worker of a larger cluster
sees. With --memo it prints cold -j2 with the proof memo off and on (slices alternating). The
default run also prints the -j1 solver time by invariant family.
Figures: docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ave_decl.audit.batch import AuditOptions, audit  # noqa: E402
from ave_decl.pipeline import Options  # noqa: E402

MUTATIONS = [
    ("b[v] = Bs[ks + (lane // 32) * 4 + v, (w % 2) * 32 + lane % 32]", "b[v] = Bs[(w % 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]"),
    ("a[v] = As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]", "a[v] = As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + 3 - v]"),
    ("ta[1] == tb[0]", "ta[0] == tb[1]"),
    ("i = t * 16 + e", "i = t * 16 + (e + 1) % 16"),
]


def generate(out: Path, n: int, seed: int = 0) -> list[Path]:
    rnd = random.Random(seed)
    bases = [p for p in sorted((ROOT / "examples").glob("*.ave"))]
    files = []
    for i in range(n):
        base = rnd.choice(bases)
        text = base.read_text()
        text = re.sub(r"def (\w+)\(", lambda m: f"def {m.group(1)}_v{i}(", text, count=1)
        if rnd.random() < 0.5:
            old, new = rnd.choice(MUTATIONS)
            text = text.replace(old, new)
        path = out / f"v{i:05d}_{base.stem}.ave"
        path.write_text(text)
        files.append(path)
    return files


def by_invariant(report) -> list[tuple[str, float]]:
    """Solver milliseconds per invariant family (summed over the findings), largest first: where
    an audit's solving goes (issue 16)."""
    totals: dict[str, float] = {}
    for k in report.kernels:
        for f in k.findings:
            totals[f.invariant] = totals.get(f.invariant, 0.0) + (f.solver_ms or 0.0)
    return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))


def timed(opts: AuditOptions, paths: list[str], runner=None):
    t0 = time.perf_counter()
    report, stats = audit(paths, opts, runner=runner)
    return time.perf_counter() - t0, report, stats


def dask_main(files: list[Path], slices: int, subset: int) -> None:
    """-j2 vs a 2-worker LocalCluster, cold (no cache), the same reports. The corpus is cut into
    slices audited alternately by both, so a load that changes during the run (a shared machine)
    weighs on both alike; then chunks of 4 and 1 kernels on a subset."""
    from distributed import Client, LocalCluster

    from ave_decl.audit.distributed import DaskRunner

    def opts(chunk: int = 16) -> AuditOptions:
        return AuditOptions(Options(violation_sets=False), jobs=2, file_timeout_s=120, cache_dir=None, chunk=chunk)

    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, scheduler_port=0,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        started = time.perf_counter() - t0
        runner = DaskRunner(client)
        total_local = total_dask = 0.0
        ratios, same = [], True
        for i in range(slices):
            part = [str(f) for f in files[i::slices]]
            t_l, local, _ = timed(opts(), part)
            t_d, remote, _ = timed(opts(), part, runner)
            same &= json.dumps(local.to_json(timings=False)) == json.dumps(remote.to_json(timings=False))
            total_local, total_dask = total_local + t_l, total_dask + t_d
            ratios.append(t_l / t_d)
            print(f"slice {i + 1}/{slices} ({len(part)} kernels): -j2 {t_l:6.1f} s, Dask {t_d:6.1f} s, "
                  f"Dask/local throughput {t_l / t_d:.3f}", flush=True)
        n = len(files)
        print(f"-j2: {total_local:7.1f} s = {n / total_local:6.2f} kernels/s   Dask LocalCluster 2x1: "
              f"{total_dask:7.1f} s = {n / total_dask:6.2f} kernels/s   Dask/local throughput "
              f"{total_local / total_dask:.3f} (per slice: median {statistics.median(ratios):.3f}, "
              f"{min(ratios):.3f}..{max(ratios):.3f})   reports identical: {same}   "
              f"(cluster start {started:.1f} s, not counted)", flush=True)
        part = [str(f) for f in files[:subset]]
        for chunk in (4, 1) if subset else ():
            t_l, _, _ = timed(opts(chunk), part)
            t_d, _, _ = timed(opts(chunk), part, runner)
            print(f"{len(part)} kernels, chunks of {chunk} ({-(-len(part) // chunk)} tasks): -j2 "
                  f"{len(part) / t_l:6.2f} kernels/s, Dask {len(part) / t_d:6.2f} kernels/s, Dask/local "
                  f"{t_l / t_d:.3f}", flush=True)


def memo_main(files: list[Path], slices: int) -> None:
    """Cold -j2 (no verdict cache) with the proof memo off and on (solver/proof_memo.py; in
    memory, per audit chunk: the kernels of one chunk share their proofs), slices of the corpus
    alternating; the reports must be equal."""
    import os

    opts = AuditOptions(Options(violation_sets=False), jobs=2, file_timeout_s=120, cache_dir=None)
    totals = {"off": 0.0, "on": 0.0}
    same = True
    for i in range(slices):
        part = [str(f) for f in files[i::slices]]
        reports = {}
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            os.environ["AVE_PROOF_MEMO"] = mode
            t, report, _ = timed(opts, part)
            totals[mode] += t
            reports[mode] = json.dumps(report.to_json(timings=False), sort_keys=True)
        same &= reports["off"] == reports["on"]
    os.environ.pop("AVE_PROOF_MEMO", None)
    n = len(files)
    print(f"-j2 cold, memo off: {totals['off']:7.1f} s = {n / totals['off']:6.2f} kernels/s; memo on: "
          f"{totals['on']:7.1f} s = {n / totals['on']:6.2f} kernels/s; on/off time {totals['on'] / totals['off']:.3f}; "
          f"reports identical: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--keep", type=Path, default=None, help="write the corpus here instead of a temp dir")
    ap.add_argument("--dask", action="store_true", help="-j2 against a 2-worker Dask LocalCluster")
    ap.add_argument("--slices", type=int, default=10, help="--dask: slices audited alternately by both")
    ap.add_argument("--subset", type=int, default=60, help="--dask: kernels of the small-chunk runs (0: none)")
    ap.add_argument("--memo", action="store_true", help="cold -j2 with the proof memo off and on, alternating slices")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ave-audit-bench-"))
    corpus = args.keep or tmp / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    files = generate(corpus, args.variants)
    print(f"corpus: {len(files)} kernel files in {corpus}")
    if args.memo:
        memo_main(files, args.slices)
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    if args.dask:
        dask_main(files, args.slices, args.subset)
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    rows = []
    for jobs in (1, 2):
        cache = tmp / f"cache-j{jobs}"
        opts = AuditOptions(Options(violation_sets=False), jobs=jobs, file_timeout_s=120, cache_dir=cache)
        cold, report, _ = timed(opts, [str(corpus)])
        warm, report2, stats = timed(opts, [str(corpus)])
        assert stats.cached == len(files)
        rows.append((jobs, cold, warm, report))
        print(f"-j{jobs}: cold {cold:7.2f} s = {len(files) / cold:7.1f} kernels/s   "
              f"warm (cache) {warm:6.3f} s = {len(files) / warm:9.1f} kernels/s")
    per_kernel = AuditOptions(Options(violation_sets=False), jobs=2, file_timeout_s=120, cache_dir=None, chunk=1)
    t_single, _, _ = timed(per_kernel, [str(corpus)])
    print(f"-j2 one fixpoint per kernel (chunk=1): {t_single:7.2f} s = {len(files) / t_single:7.1f} kernels/s; "
          f"batched/per-kernel speedup {t_single / rows[1][1]:.2f}x")
    from ave_decl.datalog.souffle_engine import find_souffle

    if find_souffle():
        sopts = AuditOptions(Options(engine="souffle", violation_sets=False), jobs=2, file_timeout_s=120,
                             cache_dir=None)
        t_souffle, _, _ = timed(sopts, [str(corpus)])
        print(f"-j2 souffle engine (cold): {t_souffle:7.2f} s = {len(files) / t_souffle:7.1f} kernels/s; "
              f"embedded/souffle time ratio {rows[1][1] / t_souffle:.2f}")
    else:
        print("souffle: not found (set AVE_SOUFFLE or put it on PATH to compare engines)")
    report = rows[0][3]
    totals: dict[str, float] = {}
    for k in report.kernels:
        for phase, ms in k.timings_ms.items():
            totals[phase] = totals.get(phase, 0.0) + ms
    print("per-phase (ms per kernel, -j1 cold): " + ", ".join(
        f"{p} {totals[p] / max(1, len(report.kernels)):.1f}" for p in ("parse", "facts", "fixpoint", "solving")
        if p in totals))
    print("solving by invariant family (-j1 cold, ms per kernel; the time each finding's obligation took): "
          + ", ".join(f"{inv} {ms / max(1, len(report.kernels)):.1f}" for inv, ms in by_invariant(report)))
    s = report.summary()
    print(f"verdicts: {s}")
    if args.keep is None:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
