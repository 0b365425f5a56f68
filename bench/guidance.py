"""The guidance experiment (issue 15): does telling a repair agent *where* a kernel went wrong
(Ave's invariant, counterexample and chain) fix it with fewer evaluations than telling it *that*
the result is wrong?

Corpus: every output-changing mutant of every workload (`ave_decl.testing.mutate` on the files
bench/mutants.py uses; output-changing: the simulator's output differs from the reference at
the first sizes) plus the broken catalogue transformations (`ave_decl.transform.catalogue.
MUTATIONS`) where they change a workload's output. Per bug and feedback mode
(`ave_planner.agent.MODES`), the agent repairs the bug within a fixed budget of evaluations;
every `check` and every simulator run counts as one (the bug's own evaluation and the invariant
modes' check-first pre-screen included). A fix is accepted when it is VERIFIED and its output
matches the reference at two sizes (bench/mutants.py's sizes and the smallest the workload
admits); a candidate that changes the frozen spec is rejected before evaluation and counted.
Also: where the fixing edit lies relative to the first counterexample (chain, use site,
elsewhere), and the invariant ablation (only the paper's invariant kinds vs the full library).

    python bench/guidance.py [--budget N] [--jobs N] [--json FILE] [--markdown FILE] [--fast]
                             [--only WORKLOAD...] [--limit N] [--agent search|llm] [--model M]

`--fast` (tests/test_guidance.py, `make test`): two bugs of one workload, budget 4. Figures:
docs/agent-guidance.md.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ave_decl.lang import printer  # noqa: E402
from ave_decl.lang.parser import clear_parse_memo, parse_text  # noqa: E402
from ave_decl.lang.source import SourceFile  # noqa: E402
from ave_planner.agent import MODES  # noqa: E402
from ave_planner.evaluate import CANDIDATE_PATH, CallCache, Evaluator  # noqa: E402
from ave_planner.feedback import chain_lines, feedback  # noqa: E402
from ave_planner.repair import SpecGuard, repair  # noqa: E402

BUDGET = 40
PAPER_INVARIANTS = ("ave/tag-assert", "ave/mma-k-pairing")  # explicit tag assertions + instruction pairing
FAMILIES = ("GEMM", "attention", "MoE", "NVIDIA", "other")
FAST = ("gemm_lds_mfma", ("transpose_shared_read", "swap_lane_value"), 4)


@dataclass
class Bug:
    id: str
    workload: str
    family: str
    source: str  # mutant | catalogue
    operator: str
    text: str  # canonical text (printed AST): every mode starts from the same kernel
    sizes_a: dict
    sizes_b: dict


def family(path: Path, text: str) -> str:
    if "ave.nvidia" in text:
        return "NVIDIA"
    if "attention" in path.stem:
        return "attention"
    if "moe" in path.stem:
        return "MoE"
    return "GEMM" if "gemm" in path.stem or "mfma" in text else "other"


def simulate(text: str, sizes: dict, seed: int = 0) -> dict:
    """One simulator run compared with the reference: the reference-run call of the experiment
    (for `diff`: also the first differing output elements). What `sim.run.simulate_source` does
    for one kernel, the reference evaluated once for both uses (the AST is the front end's
    memoised one: the guard and `check` parsed the same text under the same path)."""
    from ave_decl.lang.resolve import resolve_imports
    from ave_decl.sim.interpreter import Simulator
    from ave_decl.sim.reference import compare, evaluate_reference, reference_of

    try:
        module = parse_text(text, CANDIDATE_PATH)
        imports = resolve_imports(module)
        (k,) = module.kernels
        ref = reference_of(k)
        r = Simulator(k, imports, sizes, seed=seed, shadow=False).run()
        want = None if ref is None or ref.output not in r.outputs else evaluate_reference(ref, r.inputs, r.sizes)
    except Exception as exc:  # noqa: BLE001 - a candidate the simulator cannot run is a failed run
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if ref is None:
        return {"ok": False, "error": "no reference"}
    if want is None:
        return {"ok": False, "error": f"the kernel never writes {ref.output}",
                **{k: None for k in ("max_abs", "rel", "mismatched", "elements", "worst_index")}}
    cmp = compare(r.outputs[ref.output], want, ref.tolerance)
    out = {"ok": bool(cmp.get("ok")), "error": cmp.get("why"),
           **{k: cmp.get(k) for k in ("max_abs", "rel", "mismatched", "elements", "worst_index")}}
    if not out["ok"] and "mismatched" in cmp:
        out["differing"] = _differing(r.outputs[ref.output], want, cmp["tol"])
    return out


def _differing(got, want, tol: float, at_most: int = 8) -> list[list[int]]:
    import numpy as np

    got = got.astype(np.float64)
    if got.shape != want.shape:
        return []
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    with np.errstate(all="ignore"):
        bad = np.argwhere(~(np.abs(got - want) <= tol * scale))
    return [[int(i) for i in row] for row in bad[:at_most]]


def _sizes(path: Path, text: str) -> tuple[dict, dict]:
    import mutants as MB

    from ave_decl.solver.sizes import complete_sizes

    a = MB.WORKLOAD_SIZES.get(path.stem, MB.SIZES)
    b = complete_sizes(SourceFile(str(path), text), {})[0].sizes
    if b == {k: v for k, v in a.items() if k in b}:
        b = {k: 2 * v for k, v in b.items()}
    return a, b


def workload_bugs(wl: Path, fast: bool, seed: int) -> tuple[list[Bug], dict]:
    """The output-changing bugs of one workload (its mutants, then its broken catalogue
    transformations), and how many candidates were left out and why."""
    from ave_decl.testing.mutate import mutants
    from ave_decl.transform.catalogue import MUTATIONS

    text = wl.read_text()
    a, b = _sizes(wl, text)
    made = [(m.operator, f"{m.operator}@{m.line}", m.text, "mutant")
            for m in mutants(text, list(FAST[1]) if fast else None, first_only=False)]
    if not fast:
        module = parse_text(text, str(wl))
        for name, fn in MUTATIONS.items():
            changed = fn(module)
            if changed != module:
                made.append((name, name, printer.module(changed), "catalogue"))
    bugs, dropped = [], {"output unchanged": 0, "not simulated": 0}
    for operator, tag, bug_text, source in made:
        try:
            canonical = printer.module(parse_text(bug_text, "bug.ave"))
        except Exception:  # noqa: BLE001 - a bug that does not print back is not a repair task
            dropped["not simulated"] += 1
            continue
        truth = simulate(canonical, a, seed)
        if truth.get("error") and "mismatched" not in truth:
            dropped["not simulated"] += 1
            continue
        if truth["ok"]:
            dropped["output unchanged"] += 1
            continue
        bugs.append(Bug(f"{wl.stem}~{tag}", wl.stem, family(wl, text), source, operator, canonical, a, b))
    return bugs, dropped


def corpus_key(files: list[Path], fast: bool, only: list[str] | None, seed: int) -> str:
    """The hash of everything the corpus is a function of: the workloads' text, the code that
    mutates, parses, prints and simulates them (all of ave_decl, bench/mutants.py and this file),
    and the arguments. Any change to one of them is another key, so a cached corpus is never
    stale."""
    code = sorted((ROOT / "ave_decl").rglob("*.py")) + [ROOT / "bench" / "mutants.py", Path(__file__).resolve()]
    h = hashlib.sha256(json.dumps([fast, sorted(only or []), seed]).encode())
    for f in code + files:
        h.update(str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f).encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("AVE_GUIDANCE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ave", "guidance")
    return Path(base)


def _cached(path: Path, key: str) -> tuple[list[Bug], dict] | None:
    """The corpus stored at `path` if it was made under `key` (anything else, a stale or
    unreadable entry included, is a miss: the corpus is built again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") != key:
            return None
        return [Bug(**b) for b in data["bugs"]], dict(data["dropped"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def corpus(fast: bool, only: list[str] | None, seed: int, pool=None, cache: bool = True) -> tuple[list[Bug], dict]:
    """The output-changing bugs (interleaved: `_round_robin`), and how many candidates were left
    out and why. Built once per key (`corpus_key`) and kept in `cache_dir()`; the workloads are
    simulated in `pool` when one is given."""
    import mutants as MB

    files = MB.workloads(False, [FAST[0]] if fast else only)
    key = corpus_key(files, fast, only, seed)
    path = cache_dir() / f"corpus-{key[:24]}.json"
    found = _cached(path, key) if cache else None
    if found is None:
        parts = list((pool.map if pool else map)(workload_bugs, files, [fast] * len(files), [seed] * len(files)))
        bugs = [b for part, _ in parts for b in part]
        dropped = {k: sum(d[k] for _, d in parts) for k in ("output unchanged", "not simulated")}
        if fast:  # the first bug of each of the two operators
            bugs = [next(b for b in bugs if b.operator == op) for op in FAST[1]]
        if cache:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(str(path), json.dumps({"key": key, "bugs": [asdict(b) for b in bugs], "dropped": dropped}))
        found = bugs, dropped
    return _round_robin(found[0]), found[1]


def _interleave(groups: list[list]) -> list:
    """The first of each group, then the second of each, ..."""
    out, i = [], 0
    while len(out) < sum(map(len, groups)):
        out += [q[i] for q in groups if i < len(q)]
        i += 1
    return out


def _round_robin(bugs: list[Bug]) -> list[Bug]:
    """Workloads interleaved, and within a workload its operators (and broken transformations)
    interleaved: the first N bugs of a run cut short (`--limit N`) are a spread over the
    workloads and the operators, not the first workloads or the first operator of each."""
    by: dict[str, dict[str, list[Bug]]] = {}
    for b in bugs:
        by.setdefault(b.workload, {}).setdefault(b.operator, []).append(b)
    return _interleave([_interleave(list(ops.values())) for ops in by.values()])


def changed_lines(before: str, after: str) -> list[int]:
    """The 1-based lines of `before` an edit touched (an insertion: the line it goes before)."""
    out: list[int] = []
    sm = difflib.SequenceMatcher(a=before.split("\n"), b=after.split("\n"), autojunk=False)
    for tag, i1, i2, _, _ in sm.get_opcodes():
        if tag == "equal":
            continue
        out += list(range(i1 + 1, i2 + 1)) if i2 > i1 else [i1 + 1]
    return out


def unified(before: str, after: str) -> str:
    return "\n".join(difflib.unified_diff(before.split("\n"), after.split("\n"), lineterm="", n=0))


def where(finding: dict | None, lines: list[int]) -> str:
    """Does the fix lie at the first finding's use site, on its chain, or elsewhere?"""
    if not finding:
        return "no counterexample"
    use = (finding.get("location") or {}).get("line")
    if use in lines:
        return "use site"
    if set(lines) & set(chain_lines(finding)):
        return "chain"
    return "elsewhere"


def ablation(check: dict) -> dict:
    """The bug's verdict with the full library and with only the paper's invariant kinds (the
    failing findings of one check, filtered: every invariant's obligations are solved alone)."""
    full = check["verdict"]
    if full == "ERROR":
        return {"full": full, "paper": full}
    mine = [f for f in check["findings"] if f["invariant"] in PAPER_INVARIANTS]
    paper = ("VIOLATION" if any(f["verdict"] == "VIOLATION" for f in mine)
             else "UNKNOWN" if mine else "VERIFIED")
    return {"full": full, "paper": paper}


def make_agent(kind: str, model: str | None, seed: int = 0):
    if kind == "llm":
        from ave_planner.llm_agent import LLMAgent

        return LLMAgent(model=model, seed=seed)
    from ave_planner.search_agent import SearchAgent

    return SearchAgent()


def run_bug(bug: Bug, budget: int, agent: str, model: str | None, seed: int, memo: bool = True) -> dict:
    """Every mode on one bug. With `memo` (the default), the modes' calls are answered once from
    a shared cache, each still counted in every mode that asks it, and the frozen-spec guard's
    answers are shared too; without, every mode starts afresh (the same records, slower:
    tests/test_guidance.py compares them)."""
    from ave_planner.evaluate import check_summary

    cache, guard = CallCache(), SpecGuard(bug.text)
    run = (lambda text, sizes: simulate(text, sizes, seed))
    cpu0 = time.process_time()
    # the full check (the ablation reads every finding), kept as the evaluator's answer for the bug's
    # own text: it holds the first MAX_FINDINGS findings that check would, and feedback reads no more
    first = cache.get(("check", bug.text), lambda: check_summary(bug.text))[0]
    finding = first["findings"][0] if first["findings"] else None
    rec = {"bug": bug.id, "workload": bug.workload, "family": bug.family, "source": bug.source,
           "operator": bug.operator, "verdict": first["verdict"], "ablation": ablation(first),
           "first_finding": None if finding is None else {
               "invariant": finding["invariant"], "line": (finding.get("location") or {}).get("line"),
               "chain_lines": chain_lines(finding)}, "modes": {}}
    for mode in MODES:
        if not memo:
            clear_parse_memo()
            cache, guard = CallCache(), SpecGuard(bug.text)
        ev = Evaluator(bug.sizes_a, bug.sizes_b, budget, run, cache, device="mi300x")
        the_agent = make_agent(agent, model, seed)
        res = repair(bug.text, the_agent, mode, ev, guard=guard)
        out = res.to_json(steps=False)
        if getattr(the_agent, "error", None):  # an LLM endpoint that failed: the repair ended there
            out["agent_error"] = the_agent.error
        out.pop("fix")
        if res.fixed:
            lines = changed_lines(bug.text, res.fix)
            out["fix_lines"] = lines
            out["fix_where"] = where(finding, lines)
            out["fix_diff"] = unified(bug.text, res.fix)
        out["trajectory"] = [{"edit": asdict(s.edit) if s.edit else None, "outcome": s.outcome, "calls": s.calls,
                              "counted": s.counted} for s in res.steps]
        rec["modes"][mode] = out
    rec["cpu_s"] = round(time.process_time() - cpu0, 2)  # this bug's CPU time: what a run on an idle machine takes
    return rec


def transcript(bug_id: str, modes: tuple[str, ...] = ("result", "invariant"), budget: int = BUDGET,
               seed: int = 0) -> str:
    """A repair of one bug under each mode, step by step: the edit, the calls it cost, and the
    feedback the agent read (Markdown, for docs/agent-guidance.md)."""
    bugs, _ = corpus(False, [bug_id.split("~")[0]], seed)
    bug = next(b for b in bugs if b.id == bug_id)
    cache = CallCache()

    def evaluator() -> Evaluator:
        return Evaluator(bug.sizes_a, bug.sizes_b, budget, lambda t, z: simulate(t, z, seed), cache, device="mi300x")

    out = [f"### {bug.id} ({bug.family}, {bug.source})", ""]
    for mode in modes:
        res = repair(bug.text, make_agent("search", None, seed), mode, evaluator())
        out += [f"**{mode}**: {'fixed' if res.fixed else 'not fixed'} after {res.evaluations} evaluations "
                f"({res.candidates} candidates, {res.rejected} rejected by the guard)", "", "```"]
        first = feedback(mode, evaluator().evaluate(bug.text, mode)).data
        out.append("bug: " + json.dumps(first, sort_keys=True)[:600])
        steps = res.steps if len(res.steps) <= 20 else res.steps[:12] + [None] + res.steps[-4:]
        for st in steps:
            if st is None:
                out.append(f"     ... {len(res.steps) - 16} more steps ...")
                continue
            e = st.edit
            what = f"{e.kind} line {e.line}: {e.description}" if e else "(no edit record)"
            shown = json.dumps(st.feedback, sort_keys=True)
            out.append(f"{st.index:3}. {what} -> {st.outcome}, {st.counted} evaluation(s) {st.calls}: "
                       f"{shown[:200] + ('...' if len(shown) > 200 else '')}")
        out += ["```", ""]
        if res.fixed:
            out += ["```diff", unified(bug.text, res.fix), "```", ""]
    return "\n".join(out)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summarize(records: list[dict], budget: int) -> dict:
    def block(recs: list[dict]) -> dict:
        out = {}
        for mode in MODES:
            rs = [r["modes"][mode] for r in recs]
            evals = [x["evaluations"] if x["fixed"] else budget + 1 for x in rs]  # unfixed: past the budget
            fixed = [x for x in rs if x["fixed"]]
            out[mode] = {"bugs": len(rs), "fixed": len(fixed),
                         # median_high: with an even count, never the mean of a fixed and an unfixed bug
                         "median_evaluations": statistics.median_high(evals) if evals else None,
                         "p90_evaluations": _pct(evals, 0.9) if evals else None,
                         "median_evaluations_fixed":
                             statistics.median([x["evaluations"] for x in fixed]) if fixed else None,
                         "median_seconds": statistics.median([x["seconds"] for x in rs]) if rs else None,
                         "guard_rejected": sum(x["rejected"] for x in rs),
                         "candidates": sum(x["candidates"] for x in rs)}
        return out

    fams = {f: block([r for r in records if r["family"] == f]) for f in FAMILIES
            if any(r["family"] == f for r in records)}
    places: dict[str, dict[str, int]] = {}
    for r in records:
        inv = (r["first_finding"] or {}).get("invariant", "(none)")
        for m in r["modes"].values():
            if m["fixed"]:
                places.setdefault(inv, {}).setdefault(m["fix_where"], 0)
                places[inv][m["fix_where"]] += 1
    operators: dict[str, dict] = {}
    for r in records:
        o = operators.setdefault(r["operator"], {"bugs": 0, **{m: 0 for m in MODES}})
        o["bugs"] += 1
        for m in MODES:
            o[m] += int(r["modes"][m]["fixed"])
    paper_verified = [r["bug"] for r in records if r["ablation"]["paper"] == "VERIFIED"]
    full_verified = [r["bug"] for r in records if r["ablation"]["full"] == "VERIFIED"]
    return {"bugs": len(records), "budget": budget, "overall": block(records), "families": fams,
            "fix_location": places, "operators": operators,
            "ablation": {"output_changing": len(records), "verified_full_library": len(full_verified),
                         "verified_paper_invariants_only": len(paper_verified),
                         "full_library_let_through": full_verified, "paper_only_let_through": paper_verified}}


def _ev(v, budget: int) -> str:
    if v is None:
        return "-"
    return f">{budget}" if v > budget else f"{v:g}"


GOAL = 5.0  # the project's goal: `invariant` needs >= 5x fewer evaluations (median) than `result`


def headline(block: dict, budget: int) -> str:
    """`invariant` vs `result`: fix rates, median evaluations and their ratio. An unfixed bug counts
    as past the budget, so a median past it is censored: the ratio is then a lower bound (when
    `invariant`'s own median is within the budget) or unknown."""
    inv, res = block["invariant"], block["result"]
    mi, mr = inv["median_evaluations"], res["median_evaluations"]
    rates = f"`invariant` fixed {inv['fixed']}/{inv['bugs']}, `result` {res['fixed']}/{res['bugs']}"
    medians = f"median evaluations {_ev(mi, budget)} vs {_ev(mr, budget)}"
    if mi is None or mr is None or mi > budget:
        return f"{rates}; {medians}: the ratio is unknown (`invariant`'s median is past the budget)."
    ratio, bound = mr / mi, mr > budget
    met = inv["fixed"] >= res["fixed"] and ratio >= GOAL
    verdict = ("the >= 5x goal is met" if met else "the >= 5x goal is not shown" if bound
               else "the >= 5x goal is not met")
    return (f"{rates}; {medians}: {'at least ' if bound else ''}{ratio:.1f}x fewer"
            f"{' (censored at the budget)' if bound else ''}; {verdict}.")


def table(summary: dict) -> str:
    b = summary["budget"]
    head = ["| mode | fixed | median evaluations | p90 evaluations | median evaluations (fixed) | median seconds "
            "| guard rejects |", "| --- | --- | --- | --- | --- | --- | --- |"]

    def rows(block: dict) -> list[str]:
        return [f"| {m} | {x['fixed']}/{x['bugs']} | {_ev(x['median_evaluations'], b)} | "
                f"{_ev(x['p90_evaluations'], b)} | {_ev(x['median_evaluations_fixed'], b)} | "
                f"{x['median_seconds']:.1f} | {x['guard_rejected']} |" for m, x in block.items()]

    out = [f"Overall ({summary['bugs']} bugs, budget {b} evaluations; unfixed counts as >{b}):", ""] + head
    out += rows(summary["overall"]) + ["", "Headline: " + headline(summary["overall"], b)]
    for fam, block in summary["families"].items():
        out += ["", f"{fam} ({next(iter(block.values()))['bugs']} bugs):", ""] + head + rows(block)
        out += ["", "Headline: " + headline(block, b)]
    out += ["", "Where the accepted fix lies (per fixed bug and mode), by the first finding's invariant:", "",
            "| invariant | use site | chain | elsewhere |", "| --- | --- | --- | --- |"]
    for inv, counts in sorted(summary["fix_location"].items()):
        out.append(f"| {inv} | {counts.get('use site', 0)} | {counts.get('chain', 0)} | {counts.get('elsewhere', 0)} |")
    out += ["", "Bugs fixed per operator (mutants) or broken transformation (catalogue):", "",
            "| operator | bugs | " + " | ".join(MODES) + " |", "| --- | --- |" + " --- |" * len(MODES)]
    for op, o in sorted(summary.get("operators", {}).items()):
        out.append(f"| {op} | {o['bugs']} | " + " | ".join(str(o[m]) for m in MODES) + " |")
    out += ablation_table(summary["ablation"])
    return "\n".join(out)


def ablation_table(a: dict) -> list[str]:
    return ["", "Invariant ablation (output-changing bugs let through as VERIFIED):", "",
            "| invariants | VERIFIED (missed) | of |", "| --- | --- | --- |",
            f"| paper's kinds only ({', '.join(PAPER_INVARIANTS)}) | {a['verified_paper_invariants_only']} | "
            f"{a['output_changing']} |",
            f"| full library | {a['verified_full_library']} | {a['output_changing']} |"]


def ablation_only(only: list[str] | None, seed: int) -> dict:
    """The invariant ablation over the whole corpus: one check of each bug, nothing repaired."""
    from ave_planner.evaluate import check_summary

    bugs, dropped = corpus(False, only, seed)
    rows = [{"bug": b.id, "operator": b.operator, **ablation(check_summary(b.text))} for b in bugs]
    return {"output_changing": len(rows), "dropped": dropped,
            "verified_full_library": sum(r["full"] == "VERIFIED" for r in rows),
            "verified_paper_invariants_only": sum(r["paper"] == "VERIFIED" for r in rows),
            "full_library_let_through": [r["bug"] for r in rows if r["full"] == "VERIFIED"],
            "paper_only_let_through": [r["bug"] for r in rows if r["paper"] == "VERIFIED"], "rows": rows}


def _one(args: tuple) -> dict:
    return run_bug(*args)


def run(fast: bool = False, budget: int = BUDGET, jobs: int = 1, only: list[str] | None = None,
        limit: int | None = None, agent: str = "search", model: str | None = None, seed: int = 0,
        progress=None, cache: bool = True) -> dict:
    """The experiment: the corpus (from `cache_dir()` when `cache`), then every bug in every mode,
    bugs in parallel over `jobs` processes (records in corpus order)."""
    t0 = time.perf_counter()
    budget = FAST[2] if fast else budget
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) if jobs > 1 else nullcontext() as pool:
        bugs, dropped = corpus(fast, only, seed, pool, cache)
        if limit:
            bugs = bugs[:limit]
        work = [(b, budget, agent, model, seed) for b in bugs]
        records = []
        for rec in (pool.map if pool else map)(_one, work):
            records.append(rec)
            if progress:
                progress(rec)
    return {"summary": summarize(records, budget), "dropped": dropped, "agent": agent, "model": model,
            "seed": seed, "wall_s": time.perf_counter() - t0, "cpu_s": _cpu_seconds(), "jobs": jobs,
            "records": records}


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished workers: on a shared machine the wall time is
    inflated by the others' load, the CPU time much less (an idle machine's wall time is about it
    divided by the jobs)."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _line(rec: dict, records_file: str | None = None) -> None:
    if records_file:
        with open(records_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    cells = " ".join(f"{m}={'%d' % x['evaluations'] if x['fixed'] else '-'}" for m, x in rec["modes"].items())
    print(f"{rec['bug']:50} {cells}", file=sys.stderr, flush=True)


def _write(path: str, text: str) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=BUDGET, help="evaluations per bug and mode")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (bugs in parallel)")
    ap.add_argument("--json", metavar="FILE", help="write the summary and every bug's record as JSON")
    ap.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown")
    ap.add_argument("--fast", action="store_true", help="two bugs, budget 4 (the make-test slice)")
    ap.add_argument("--only", nargs="+", metavar="WORKLOAD", help="these workloads only (file stems)")
    ap.add_argument("--limit", type=int, help="the first N bugs of the corpus only")
    ap.add_argument("--agent", choices=("search", "llm"), default="search")
    ap.add_argument("--model", default=None, help="the LLM agent's model (AVE_LLM_BASE_URL: its endpoint)")
    ap.add_argument("--seed", type=int, default=0, help="the simulator's input seed (and the LLM's)")
    ap.add_argument("--records", metavar="FILE", help="append each bug's record to FILE (JSONL) as it finishes")
    ap.add_argument("--summarize", metavar="FILE", help="no run: the tables of the records in FILE (JSONL)")
    ap.add_argument("--transcript", metavar="BUG", help="no experiment: the repair of BUG under result and "
                                                         "invariant, step by step")
    ap.add_argument("--ablation", action="store_true", help="no repairs: the invariant ablation of the whole corpus")
    args = ap.parse_args()
    if args.ablation:
        a = ablation_only(args.only, args.seed)
        if args.json:
            _write(args.json, json.dumps(a, indent=1))
        print("\n".join(ablation_table(a)))
        print(f"corpus: {a['output_changing']} output-changing bugs; left out: {a['dropped']}")
        return 0
    if args.transcript:
        print(transcript(args.transcript, budget=args.budget, seed=args.seed))
        return 0
    if args.budget < 2:
        ap.error("--budget must be at least 2")
    if args.agent == "llm":
        try:
            import openai  # noqa: F401
        except ImportError:
            ap.error("--agent llm needs the planner's llm extra: pip install -e 'planner[llm]'")
    if args.summarize:
        records = [json.loads(x) for x in Path(args.summarize).read_text().splitlines() if x.strip()]
        print(table(summarize(records, args.budget)))
        return 0
    result = run(args.fast, args.budget, args.jobs, args.only, args.limit, args.agent, args.model, args.seed,
                 lambda rec: _line(rec, args.records))
    text = table(result["summary"])
    if args.json:
        _write(args.json, json.dumps(result, indent=1))
    if args.markdown:
        _write(args.markdown, text + "\n")
    print(text)
    print(f"\n{result['summary']['bugs']} bugs, {result['wall_s']:.0f} s wall with {args.jobs} job(s), "
          f"{result['cpu_s']:.0f} CPU seconds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
