"""Per-phase times of `ave check` on each example: cold (first run in a fresh process) and warm.

Prints milliseconds per phase and the warm/cold ratio; the machine is noisy, so compare ratios
within one run rather than absolute numbers across runs. Usage: python bench/check.py [--repeat N]

`--cli FILE` times whole `ave check FILE` processes instead (cold start as a shell sees it).
`--agent-loop FILE` times `ave check` processes on FILE and its mutants with and without
`--proof-cache` (what an agent loop that shells out pays per candidate).
`--memo-cost` compares the child CPU of a first check per example with the memo off and on.
`--memo` keeps the proof memo on (off by default: a warm run would reuse every proof of the first).
`--jobs N` decides each kernel's obligations with N processes, as `ave check` does with every
core (default 1: the single-process work).

`--against REV` measures a git revision too (extracted with `git worktree` into a temporary
directory): for each example, fresh processes of both trees alternate, each timing one cold run
and the median of N warm runs, so a busy machine slows both sides alike; the table gives the
warm and cold totals of both and the ratio now / REV. This replaces switches for "the old path"
in the product code.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("parse", "facts", "fixpoint", "solving", "report")


def one_run(path: Path) -> dict[str, float]:
    """Time each stage of the pipeline once, in this process (in the z3 mode and with the
    allocator and collector settings `ave check` uses; a revision from before one of them,
    measured by --against, runs without it)."""
    with ExitStack() as modes:
        try:
            from ave_decl.solver.allocator import keep_freed_memory
            keep_freed_memory()
        except ImportError:
            pass
        try:
            from ave_decl.solver import fast_z3
            modes.enter_context(fast_z3())
        except ImportError:
            pass
        try:
            from ave_decl.solver.allocator import few_collections
            modes.enter_context(few_collections())
        except ImportError:
            pass
        return _one_run(path)


def _one_run(path: Path) -> dict[str, float]:
    from ave_decl.datalog.clingo_engine import ClingoEngine
    from ave_decl.datalog.ruleset import load_rules, rule_metadata
    from ave_decl.facts.kernel_facts import merge
    from ave_decl.facts.lower import lower_module
    from ave_decl.facts.view import KernelView
    from ave_decl.lang.parser import parse_source
    from ave_decl.lang.source import SourceFile
    from ave_decl.pipeline import kernel_verdict, split_by_kernel
    from ave_decl.report.model import KernelReport, Report
    from ave_decl.report.text import render
    from ave_decl.solver.derived_facts import add_semantic_facts
    from ave_decl.solver.solve import KernelSolver

    t = {}
    t0 = time.perf_counter()
    src = SourceFile.read(path)
    module = parse_source(src)
    t1 = time.perf_counter()
    kernels = lower_module(module, src)
    # None before eff60b5 (bench/check.py --against); since, the context its solver goes on in
    # (pipeline.front_end keeps one: this single-kernel benchmark keeps each)
    contexts = {kf.kid: add_semantic_facts(kf) for kf in kernels}
    t2 = time.perf_counter()
    prog = load_rules()
    derived = split_by_kernel(ClingoEngine(prog).run(merge(kernels)))
    t3 = time.perf_counter()
    report = Report()
    for kf in kernels:
        shared = {"context": contexts.pop(kf.kid)} if contexts.get(kf.kid) is not None else {}
        findings = KernelSolver(KernelView.of(kf), derived.get(kf.kid, {}), rule_metadata(prog), 10.0,
                                **shared, **_jobs(KernelSolver)).findings()
        report.kernels.append(KernelReport(kf.name, src.path, kernel_verdict(findings), findings))
    t4 = time.perf_counter()
    render(report, {src.path: src})
    json.dumps(report.to_json())
    t5 = time.perf_counter()
    for name, a, b in zip(PHASES, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5)):
        t[name] = (b - a) * 1000
    t["total"] = (t5 - t0) * 1000
    t["verdict"] = report.kernels[0].verdict.value  # type: ignore[assignment]
    return t


def _jobs(solver_class) -> dict:
    """`jobs=` for the solver, from --jobs (children read it from AVE_BENCH_JOBS); a revision
    from before solver/parallel.py, measured by --against, decides in one process."""
    jobs = int(os.environ.get("AVE_BENCH_JOBS", "1"))
    return {"jobs": jobs} if jobs > 1 and "jobs" in inspect.signature(solver_class).parameters else {}


def child_runs(path: Path, repeat: int) -> dict:
    """One cold run, then the median of `repeat` warm runs, in this (fresh) process."""
    cold = one_run(path)
    one_run(path)
    warm = statistics.median(one_run(path)["total"] for _ in range(repeat))
    return {"cold": cold["total"], "warm": warm, "verdict": cold["verdict"]}


def against(rev: str, examples: list[Path], repeat: int, rounds: int) -> None:
    """Alternate fresh processes of this tree and of `rev` per example; print totals and ratios."""
    from revision import revision_tree

    with revision_tree(rev) as tree:
        print(f"warm = median of {repeat} in-process runs; cold = first run; median over {rounds} "
              f"alternating rounds; ms; ratio = this tree / {rev}")
        print(f"{'example':34} {'warm':>8} {rev[:8]:>8} {'ratio':>6}   {'cold':>8} {rev[:8]:>8} {'ratio':>6}")
        sums = [0.0] * 4
        for path in examples:
            if not (tree / path.relative_to(ROOT)).exists():
                print(f"{path.stem:34} (not in {rev})")
                continue
            rows: dict[str, list[dict]] = {"now": [], "rev": []}
            for _ in range(rounds):
                for side, root in (("now", ROOT), ("rev", tree)):
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child-runs",
                                          str(root / path.relative_to(ROOT)), "--repeat", str(repeat)],
                                         capture_output=True, text=True, check=True, cwd=root, env=env)
                    rows[side].append(json.loads(out.stdout))
            med = {side: {k: statistics.median(r[k] for r in rs) for k in ("warm", "cold")}
                   for side, rs in rows.items()}
            cells = [med["now"]["warm"], med["rev"]["warm"], med["now"]["cold"], med["rev"]["cold"]]
            sums = [a + b for a, b in zip(sums, cells)]
            print(f"{path.stem:34} {cells[0]:8.0f} {cells[1]:8.0f} {cells[0] / cells[1]:6.2f}   "
                  f"{cells[2]:8.0f} {cells[3]:8.0f} {cells[2] / cells[3]:6.2f}")
        print(f"{'sum':34} {sums[0]:8.0f} {sums[1]:8.0f} {sums[0] / sums[1]:6.2f}   "
              f"{sums[2]:8.0f} {sums[3]:8.0f} {sums[2] / sums[3]:6.2f}")


def cli_runs(rev: str | None, path: Path, runs: int) -> None:
    """Wall and CPU seconds of whole `ave check FILE` processes (what an agent loop that shells
    out pays), median of `runs`; with `rev`, that tree's processes alternate with this one's.
    Both sides run with bytecode caching on (as an installed package has it) after one warm-up
    process each, so this tree's build cache (lang/build_cache.py) is filled as a user's is."""
    import resource
    from contextlib import nullcontext

    def one(root: Path) -> tuple[float, float]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(root)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ave_decl.cli", "check", str(root / path.relative_to(ROOT))],
                       cwd=root, env=env, capture_output=True, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    if rev:
        from revision import revision_tree
    with revision_tree(rev) if rev else nullcontext(None) as tree:
        sides = {"now": ROOT, **({rev[:8]: tree} if tree else {})}
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for root in sides.values():
            one(root)  # warm-up: .pyc files, this tree's build cache
        for _ in range(runs):
            for side, root in sides.items():
                times[side].append(one(root))
        for side, rows in times.items():
            wall = statistics.median(w for w, _ in rows)
            cpu = statistics.median(c for _, c in rows)
            print(f"ave check {path.name} ({side}): wall {wall:.2f} s, cpu {cpu:.2f} s (median of {runs})")
        if tree:
            now, old = (statistics.median(w for w, _ in times[s]) for s in sides)
            print(f"ratio now / {rev[:8]}: {now / old:.2f}")


def agent_loop(path: Path, rounds: int) -> None:
    """What an agent loop that shells out pays per candidate: `ave check` processes on the
    kernel and then on each of its first-site mutants (candidates that differ in one statement),
    with `--proof-cache` (a fresh cache per round, so the kernel's own check fills it) and
    without; the two ways alternate per round, and their outputs must be equal."""
    import shutil
    import tempfile

    from ave_decl.testing.mutate import mutants

    text = path.read_text()
    work = Path(tempfile.mkdtemp(prefix="ave-agent-loop-"))
    try:
        files = [work / f"c00_{path.name}"]
        files[0].write_text(text)
        for i, m in enumerate(mutants(text), 1):
            files.append(work / f"c{i:02d}_{path.name}")
            files[-1].write_text(m.text)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("AVE_PROOF_MEMO", None)
        totals = {"no cache": [], "proof cache": []}
        outputs: dict[str, list[str]] = {}
        for r in range(rounds):
            cache = work / f"proofs{r}"
            for mode in ("no cache", "proof cache") if r % 2 == 0 else ("proof cache", "no cache"):
                extra = ["--proof-cache", str(cache)] if mode == "proof cache" else []
                t0, outs = time.perf_counter(), []
                for f in files:
                    done = subprocess.run([sys.executable, "-m", "ave_decl.cli", "check", "--no-timings",
                                           "--no-violation-sets", *extra, str(f)],
                                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
                    outs.append(done.stdout)
                totals[mode].append(time.perf_counter() - t0)
                outputs.setdefault(mode, outs)
        n = len(files)
        base, memo = statistics.median(totals["no cache"]), statistics.median(totals["proof cache"])
        print(f"{path.name}: the kernel and {n - 1} mutants, one `ave check` process each, median of {rounds}: "
              f"{base / n:.2f} s per candidate without, {memo / n:.2f} s with --proof-cache (ratio {memo / base:.2f}); "
              f"outputs identical: {outputs['no cache'] == outputs['proof cache']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def memo_cost(examples: list[Path], rounds: int) -> None:
    """Child CPU seconds of one `check` per example in a fresh process with the proof memo off
    and on (rounds alternate; the minimum per example): what digesting costs when nothing hits."""
    import resource

    cpu: dict[str, dict[str, list[float]]] = {"off": {}, "on": {}}
    for r in range(rounds):
        for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
            for path in examples:
                env = {**os.environ, "AVE_PROOF_MEMO": mode, "PYTHONPATH": str(ROOT)}
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([sys.executable, "-c", f"from ave_decl import check; check({str(path)!r}, "
                                "violation_sets=False)"], env=env, cwd=ROOT, check=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[mode].setdefault(path.name, []).append(after.ru_utime - before.ru_utime
                                                          + after.ru_stime - before.ru_stime)
    for path in examples:
        print(f"{path.name:34} off {min(cpu['off'][path.name]):6.2f} s   on {min(cpu['on'][path.name]):6.2f} s")
    off, on = (sum(min(v) for v in cpu[m].values()) for m in ("off", "on"))
    print(f"{'sum':34} off {off:6.2f} s   on {on:6.2f} s   ratio on/off {on / off:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", metavar="REV", help="also measure this git revision, alternating processes")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per example with --against")
    ap.add_argument("--only", nargs="+", metavar="STEM", help="these examples only (file stems, any sub-folder)")
    ap.add_argument("--cli", metavar="FILE", help="time whole `ave check FILE` processes (with --against: both trees)")
    ap.add_argument("--agent-loop", metavar="FILE", help="ave check processes on FILE and its mutants, with and "
                                                          "without --proof-cache")
    ap.add_argument("--memo-cost", action="store_true", help="child CPU of a first check per example, memo off vs on")
    ap.add_argument("--memo", action="store_true",
                    help="keep the proof memo on (solver/proof_memo.py): warm runs then reuse the proofs of the first "
                         "run, as an agent re-checking a kernel does; off by default, so warm = the work of one check")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes deciding a kernel's obligations (solver/parallel.py; `ave check` uses every core); "
                         "with --against, a revision from before it uses one")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-runs", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.memo:
        os.environ["AVE_PROOF_MEMO"] = "off"  # children inherit it
    if not (args.child or args.child_runs):  # children inherit it (their own --jobs is the default)
        os.environ["AVE_BENCH_JOBS"] = str(args.jobs)
    if args.child:
        print(json.dumps(one_run(Path(args.child))))
        return
    if args.child_runs:
        print(json.dumps(child_runs(Path(args.child_runs), args.repeat)))
        return
    sys.path.insert(0, str(ROOT))
    examples = sorted((ROOT / "examples").glob("*.ave"))
    if args.only:  # sub-folder examples too (speed/, pipelines/, production/...)
        examples = [p for p in sorted((ROOT / "examples").rglob("*.ave")) if p.stem in args.only]
    if args.cli:
        cli_runs(args.against, Path(args.cli).resolve(), max(args.repeat, 1))
        return
    if args.memo_cost:
        memo_cost(examples, max(args.rounds, 1))
        return
    if args.agent_loop:
        agent_loop(Path(args.agent_loop).resolve(), max(args.rounds, 1))
        return
    if args.against:
        against(args.against, examples, args.repeat, args.rounds)
        return
    header = f"{'example':34} {'mode':5} " + " ".join(f"{p:>9}" for p in PHASES) + f" {'total':>9}  verdict"
    print("engine: embedded (clingo); times in ms; warm = median of", args.repeat, "runs in one process")
    print(header)
    print("-" * len(header))
    for path in examples:
        cold = json.loads(subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True,
                                         text=True, check=True, cwd=ROOT).stdout)
        one_run(path)  # warm-up: grammar, rules and imports are cached after this
        runs = [one_run(path) for _ in range(args.repeat)]
        warm = {p: statistics.median(r[p] for r in runs) for p in PHASES + ("total",)}
        for mode, row in (("cold", cold), ("warm", warm)):
            cells = " ".join(f"{row[p]:9.1f}" for p in PHASES)
            print(f"{path.name:34} {mode:5} {cells} {row['total']:9.1f}  {cold['verdict']}")
        print(f"{'':34} {'ratio':5} warm/cold total = {warm['total'] / cold['total']:.2f}")
    print("souffle: not measured (the subprocess engine arrives with the engines issue)")


if __name__ == "__main__":
    main()
