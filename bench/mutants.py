"""Mutation benchmark: is the verifier sound and useful on realistic bugs?

For every correct workload in examples/ and its tails/, pipelines/, specialized/, ... folders (files that say
"Expected: VERIFIED") and every mutant that `ave_decl.testing.mutate` makes of it:
  * ground truth from the simulator at small sizes (all blocks): output differs from the numpy
    reference, a shadow-tag check fails, a race or an in-flight async read is seen, an output
    element is not written exactly once, or an access is out of bounds;
  * the static verdict of `ave check --confirm` and whether one of its counterexamples replays;
  * the check time.
Summary: unsound VERIFIED (ground truth bad, verdict VERIFIED), false alarms on the correct corpus,
share of output-changing mutants flagged VIOLATION with a confirmed counterexample, median and
p95 check time.

    python bench/mutants.py [--json FILE] [--fast] [--markdown] [--only WORKLOAD...] [--operators OP...]

`--fast` (used by `make test` through tests/test_mutants.py) takes one workload and three
operators. Figures: docs/mutation-benchmark.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ave_decl import check  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402
from ave_decl.report.model import Verdict  # noqa: E402
from ave_decl.sim.run import simulate_source  # noqa: E402
from ave_decl.sim.state import SimulationError  # noqa: E402
from ave_decl.testing.mutate import OPERATORS, mutants  # noqa: E402

SIZES = {"M": 128, "N": 64, "K": 192}  # the GEMMs
WORKLOAD_SIZES = {"flash_attention_gqa": {"H": 8, "HKV": 2, "S": 64},
                  "fused_moe": {"T": 64, "E": 3, "EM": 128, "EB": 4, "N": 64},
                  # tails in M and N (one block, two K tiles), so masks matter
                  "gemm_tail": {"M": 40, "N": 50, "K": 128},
                  # a tail block past the buffer range; two pipelined blocks
                  "buffer_copy": {"M": 100}, "lds_pipeline": {"N": 512},
                  # four tiles: the prologue's stage, both stages refilled, the unguarded last tile
                  "register_prefetch": {"T": 64},
                  # two blocks of 1024 elements (the kernel assumes N % 1024 == 0)
                  "producer_consumer": {"N": 2048}}
FAST = ("gemm_lds_mfma.ave", ("transpose_shared_read", "drop_barrier", "wrong_accumulator_output"))


def workloads(fast: bool, only: list[str] | None = None) -> list[Path]:
    patterns = ("*.ave", "tails/*.ave", "pipelines/*.ave", "specialized/*.ave", "lanes/*.ave", "helpers/*.ave",
                "buffers/*.ave", "packed/*.ave")
    found = (p for pattern in patterns for p in (ROOT / "examples").glob(pattern))
    files = sorted(p for p in found if "Expected: VERIFIED" in p.read_text())
    if only:
        files = [p for p in files if p.stem in only or p.name in only]
    return [p for p in files if p.name == FAST[0]] if fast else files


def ground_truth(path: str, text: str) -> dict:
    sizes = WORKLOAD_SIZES.get(Path(path.split("~")[0]).stem, SIZES)
    try:
        runs = simulate_source(SourceFile(path, text), sizes, shadow=True)
    except SimulationError as exc:
        return {"simulated": False, "why": exc.message, "output_wrong": False, "bad": False}
    except Exception as exc:  # noqa: BLE001 - a mutant the simulator cannot run is recorded, not fatal
        return {"simulated": False, "why": f"{type(exc).__name__}: {exc}", "output_wrong": False, "bad": False}
    (_, r), = runs
    output_wrong = bool(r.reference is not None and not r.reference.get("ok", False))
    shadow = [f.invariant for f in r.failures if f.failed]
    coverage = any(bool(np.any(c != 1)) for c in r.write_counts.values())
    races = sorted({x["kind"] for x in r.races})
    bad = output_wrong or bool(shadow) or bool(races) or coverage or bool(r.errors)
    return {"simulated": True, "output_wrong": output_wrong, "shadow_failures": shadow, "races": races,
            "coverage_wrong": coverage, "out_of_bounds": bool(r.errors), "bad": bad}


def static(path: str, text: str) -> dict:
    t0 = time.perf_counter()
    report = check(text, path=path, confirm=True, violation_sets=False, timeout=10.0)
    seconds = time.perf_counter() - t0
    if report.errors or not report.kernels:
        return {"verdict": "ERROR", "check_s": seconds, "confirmed": False, "invariants": [],
                "unconfirmed": [], "why": report.errors[0].message if report.errors else "no kernel"}
    k = report.kernels[0]
    errors = [f for f in k.findings if f.counts and f.verdict == Verdict.VIOLATION]
    confirmed = [f for f in errors if f.replay and f.replay["confirmed"]]
    unconfirmed = [f"{f.invariant}: {f.replay['detail'] if f.replay else 'no counterexample'}"
                   for f in errors if not (f.replay and f.replay["confirmed"])]
    # --confirm turns a violation the simulator does not reproduce into UNKNOWN: count those downgrades
    unconfirmed += [f"{f.invariant}: {f.replay['detail']}" for f in k.findings
                    if f.counts and f.verdict == Verdict.UNKNOWN and f.replay and not f.replay["confirmed"]]
    # does a finding's fix_hint range hold the mutated line (an omission: a dropped barrier/wait/mask)?
    hints = [f.fix_hint for f in errors if f.fix_hint]
    return {"verdict": k.verdict.value, "check_s": seconds, "confirmed": bool(confirmed), "hints": hints,
            "invariants": sorted({f.invariant for f in errors}), "unconfirmed": unconfirmed,
            "unknown": [f"{f.invariant}: {f.reason}" for f in k.findings if f.verdict == Verdict.UNKNOWN and f.counts]}


def run(fast: bool, only: list[str] | None = None, operators: list[str] | None = None) -> dict:
    cases = []
    for wl in workloads(fast, only):
        text = wl.read_text()
        rel = str(wl.relative_to(ROOT))
        base = {"workload": wl.name, "mutant": None, "line": None, **static(rel, text)}
        base.pop("hints")
        base["truth"] = ground_truth(rel, text)
        base["sizes"] = WORKLOAD_SIZES.get(wl.stem, SIZES)
        cases.append(base)
        ops = list(FAST[1]) if fast else (operators or list(OPERATORS))
        for m in mutants(text, ops, first_only=False):
            row = {"workload": wl.name, "mutant": m.operator, "line": m.line, "description": m.description}
            row.update(static(f"{rel}~{m.operator}@{m.line}", m.text))
            row["hint_covers_line"] = any(_covers(h, m.line) for h in row.pop("hints"))
            row["truth"] = ground_truth(f"{rel}~", m.text)
            cases.append(row)
            print(f"{wl.name:24} {m.operator:26} line {m.line:3}  truth={'BAD' if row['truth']['bad'] else 'ok':3} "
                  f"verdict={row['verdict']:9} confirmed={row['confirmed']!s:5} {row['check_s']:.2f}s",
                  file=sys.stderr)
    return {"summary": summarize(cases), "cases": cases, "sizes": {"gemm": SIZES, **WORKLOAD_SIZES}}


def _covers(hint: dict, line: int) -> bool:
    ranges = [hint] + ([hint["alternative"]] if "alternative" in hint else [])
    return any(r["start_line"] <= line <= r["end_line"] for r in ranges)


OMISSIONS = ("drop_barrier", "drop_async_wait", "drop_mask")  # the hint range must hold the dropped line


def summarize(cases: list[dict]) -> dict:
    correct = [c for c in cases if c["mutant"] is None]
    muts = [c for c in cases if c["mutant"] is not None]
    omitted = [c for c in muts if c["mutant"] in OMISSIONS and c["verdict"] == "VIOLATION"]
    changing = [c for c in muts if c["truth"]["output_wrong"]]
    flagged = [c for c in changing if c["verdict"] == "VIOLATION" and c["confirmed"]]
    times = sorted(c["check_s"] for c in cases)
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))] if times else 0.0
    return {
        "workloads": len(correct), "mutants": len(muts),
        "unsound_verified": sum(1 for c in muts if c["truth"]["bad"] and c["verdict"] == "VERIFIED"),
        "false_alarms": sum(1 for c in correct if c["verdict"] != "VERIFIED"),
        "output_changing": len(changing),
        "flagged_confirmed_share": (len(flagged) / len(changing)) if changing else 1.0,
        "flagged_any": sum(1 for c in muts if c["verdict"] == "VIOLATION"),
        "unconfirmed_counterexamples": sum(len(c["unconfirmed"]) for c in cases),
        # flagged omissions whose fix hint names a range holding the dropped line
        "omission_hints": f"{sum(1 for c in omitted if c.get('hint_covers_line'))} of {len(omitted)}",
        "median_check_s": statistics.median(times) if times else 0.0, "p95_check_s": p95,
    }


def table(result: dict) -> str:
    rows = ["| workload | mutant | line | simulator | verdict | confirmed | invariants | check s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in result["cases"]:
        t = c["truth"]
        truth = ("output wrong" if t.get("output_wrong") else "bad (no output change)" if t.get("bad")
                 else "ok" if t.get("simulated") else "not simulated")
        rows.append(f"| {c['workload']} | {c['mutant'] or '(correct)'} | {c['line'] or ''} | {truth} | {c['verdict']} | "
                    f"{'yes' if c['confirmed'] else 'no'} | {', '.join(c['invariants'])} | {c['check_s']:.2f} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write the summary and every case as JSON")
    ap.add_argument("--fast", action="store_true", help="one workload, three operators (the make-test slice)")
    ap.add_argument("--markdown", action="store_true", help="print the per-case table as Markdown")
    ap.add_argument("--only", nargs="+", metavar="WORKLOAD", help="these workloads only (file stems)")
    ap.add_argument("--operators", nargs="+", metavar="OP", choices=sorted(OPERATORS), help="these operators only")
    args = ap.parse_args()
    every = workloads(False)
    unknown = sorted(set(args.only or ()) - {n for p in every for n in (p.stem, p.name)})
    if unknown:  # a typo would look like a clean result (0 mutants)
        ap.error(f"--only: no correct workload named {', '.join(unknown)} "
                 f"(known: {', '.join(sorted(p.stem for p in every))})")
    result = run(args.fast, args.only, args.operators)
    if args.json:
        tmp = Path(args.json + ".tmp")
        tmp.write_text(json.dumps(result, indent=2))
        tmp.replace(args.json)
    if args.markdown:
        print(table(result))
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
