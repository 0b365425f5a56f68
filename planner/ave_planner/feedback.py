"""Feedback modes: what an agent is told about a candidate, each a pure function of its
`Evaluation` (the experiment's variable; docs/agent-guidance.md).

* `result`: only whether the output matches the reference (compiling, verifying are hidden);
* `result+perf`: plus the performance model's estimate;
* `diff`: what a unit test shows: max error, how many and which output elements differ;
* `invariant`: Ave's findings: invariant id and message, use site, the counterexample table and
  the store -> load -> use chain (and, once VERIFIED, whether the output matches);
* `invariant-site`: only the invariant ids and their lines (the ablation of `invariant`).

A call the mode's gate order did not make reads as unknown (None), never as a guess.
"""
from __future__ import annotations

from .agent import MODES, Feedback
from .evaluate import MAX_FINDINGS, Evaluation
MAX_DIFFERING = 8  # output elements listed by `diff`


def _matches(ev: Evaluation) -> bool | None:
    if ev.run_a is None:
        return None
    return bool(ev.run_a.get("ok"))


def _result(ev: Evaluation) -> dict:
    return {"output_matches": _matches(ev), "accepted": ev.accepted}


def _perf(ev: Evaluation) -> dict:
    return {**_result(ev), "estimate_ms": None if ev.estimate_s is None else round(ev.estimate_s * 1e3, 6)}


def _diff(ev: Evaluation) -> dict:
    r = ev.run_a or {}
    return {**_result(ev), "error": r.get("error"), "max_abs_error": r.get("max_abs"),
            "mismatched": r.get("mismatched"), "elements": r.get("elements"),
            "differing": list(r.get("differing", []))[:MAX_DIFFERING]}


def _line(loc: dict | None) -> int | None:
    return loc.get("line") if loc else None


def chain_lines(finding: dict) -> list[int]:
    """The lines of the counterexample's store -> load -> use chain, both sides, in order."""
    cx = finding.get("counterexample") or {}
    out: list[int] = []
    for side in ("lhs", "rhs"):
        for step in (cx.get(side) or {}).get("chain") or []:
            line = _line(step.get("location"))
            if line is not None and line not in out:
                out.append(line)
    return out


def fix_lines(finding: dict) -> list[int]:
    """The lines of the finding's fix hint (where a missing barrier, wait or mask goes)."""
    out: list[int] = []
    hint = finding.get("fix_hint") or {}
    for r in [hint] + ([hint["alternative"]] if "alternative" in hint else []):
        if "start_line" in r and "end_line" in r:
            out += [n for n in range(r["start_line"], r["end_line"] + 1) if n not in out]
    return out


def _table(cx: dict) -> dict:
    keep = ("block", "thread_linear", "lane", "iterations", "value_index", "sizes", "relation")
    out = {k: cx[k] for k in keep if k in cx}
    for side in ("lhs", "rhs"):
        if cx.get(side):
            s = cx[side]
            out[side] = {"label": s.get("label"), "tag_name": s.get("tag_name"), "tag": s.get("tag"),
                         "coordinates": s.get("coordinates"),
                         "chain": [{"kind": c.get("kind"), "buffer": c.get("buffer"), "line": _line(c.get("location"))}
                                   for c in s.get("chain") or []]}
    return out


def _invariant(ev: Evaluation) -> dict:
    c = ev.check or {}
    found = [{"invariant": f["invariant"], "message": f["message"], "line": _line(f.get("location")),
              "use_site": f.get("location"), "counterexample": _table(f.get("counterexample") or {}),
              "chain_lines": chain_lines(f), "fix_hint": f.get("fix_hint"), "fix_lines": fix_lines(f)}
             for f in c.get("findings", [])[:MAX_FINDINGS]]
    return {"verdict": c.get("verdict"), "error": c.get("error"), "findings": found,
            "output_matches": _matches(ev), "accepted": ev.accepted}


def _invariant_site(ev: Evaluation) -> dict:
    c = ev.check or {}
    return {"verdict": c.get("verdict"),
            "findings": [{"invariant": f["invariant"], "line": _line(f.get("location"))}
                         for f in c.get("findings", [])[:MAX_FINDINGS]],
            "output_matches": _matches(ev), "accepted": ev.accepted}


_MODES = {"result": _result, "result+perf": _perf, "diff": _diff, "invariant": _invariant,
          "invariant-site": _invariant_site}
assert tuple(_MODES) == MODES


def feedback(mode: str, ev: Evaluation) -> Feedback:
    """The record an agent in `mode` reads about the candidate evaluated as `ev`."""
    return Feedback(mode, _MODES[mode](ev))


def rejected(mode: str, changes: list[str]) -> Feedback:
    """The feedback on a candidate the frozen-spec guard rejected before any evaluation."""
    return Feedback(mode, {"rejected": "the candidate changes the kernel's frozen spec", "changes": changes[:5],
                           "output_matches": None, "accepted": False})
