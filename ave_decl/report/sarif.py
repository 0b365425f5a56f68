"""SARIF 2.1.0 output: rules from the `.dl` metadata headers, one result per non-verified finding.

Mapping (../shared/reference/verifier-ux-and-perf.md §2.2): `ruleId` = invariant id; the
location is the use site; `codeFlows` hold one threadFlow per side (store -> load -> use chain,
with the instance of each step as `state`); the structured counterexample goes to
`properties.counterexample`; UNKNOWN is `kind: "open"`; `partialFingerprints` hash the rule,
the kernel and the text of the site line (not its number), so they survive moved lines.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from ..lang.source import SourceFile
from ..version import __version__
from .model import ChainPoint, Finding, Location, Report, Verdict

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "note": "note", "recommendation": "note"}


def fingerprint(invariant: str, kernel: str, line_text: str, message: str = "") -> str:
    """Stable across line moves: rule, kernel and the normalised text of the site line."""
    basis = "\x1f".join([invariant, kernel, " ".join(line_text.split()), message])
    return hashlib.sha256(basis.encode("utf-8")).hexdigest()[:32]


def _uri(path: str, root: Path | None) -> str:
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


class _Lines:
    def __init__(self) -> None:
        self.cache: dict[str, SourceFile | None] = {}

    def text(self, path: str, line: int) -> str:
        if path not in self.cache:
            try:
                self.cache[path] = SourceFile.read(path)
            except Exception:  # noqa: BLE001 - a missing file only weakens the fingerprint
                self.cache[path] = None
        src = self.cache[path]
        return src.line_text(line) if src else ""


def _location(loc, root, message: str | None = None) -> dict:
    out = {"physicalLocation": {"artifactLocation": {"uri": _uri(loc.file, root)},
                                "region": {"startLine": max(1, loc.line), "startColumn": max(1, loc.col),
                                           "endLine": max(1, loc.end_line), "endColumn": max(1, loc.end_col)}}}
    if message:
        out["message"] = {"text": message}
    return out


def _thread_flow(label: str, chain: list[ChainPoint], root) -> dict:
    locations = []
    for i, p in enumerate(reversed(chain)):  # source first: the order the data moved in
        state = {k: {"text": str(v)} for k, v in p.iterations.items()}
        if p.thread is not None:
            state["thread"] = {"text": str(p.thread)}
        locations.append({"location": _location(p.location, root, f"{p.kind} {p.buffer}".strip()),
                          "kinds": ["memory"] if p.kind in ("load", "store", "source") else ["call"],
                          "state": state, "executionOrder": i + 1,
                          "importance": "essential" if p.kind in ("use", "source") else "important"})
    return {"id": label, "message": {"text": label}, "locations": locations}


def _result(k, f: Finding, root, lines: _Lines) -> dict:
    kind = {Verdict.VIOLATION: "fail", Verdict.UNKNOWN: "open", Verdict.VERIFIED: "pass"}.get(f.verdict, "review")
    res: dict = {"ruleId": f.invariant, "kind": kind, "message": {"text": f.message},
                 "locations": [_location(f.location, root)],
                 "partialFingerprints": {"primaryLocationLineHash": fingerprint(
                     f.invariant, k.kernel, lines.text(f.location.file, f.location.line))},
                 "properties": {"kernel": k.kernel, "verdict": f.verdict.value}}
    if kind == "fail":
        res["level"] = _LEVEL.get(f.severity, "error")
    else:
        res["level"] = "none" if kind == "pass" else "warning"
    if f.reason:
        res["properties"]["reason"] = f.reason
    if f.location.called_from:  # inside an inlined helper: the calls, innermost first
        res["relatedLocations"] = [
            {"id": i, **_location(Location(c["file"], c["line"], c["col"], c["line"], c["col"]), root,
                                  f"call of helper '{c['helper']}'")}
            for i, c in enumerate(f.location.called_from)]
    c = f.counterexample
    if c is not None:
        res["properties"]["counterexample"] = asdict(c)
        flows = [_thread_flow(side.label, side.chain, root) for side in (c.lhs, c.rhs) if side.chain]
        if flows:
            res["codeFlows"] = [{"message": {"text": c.relation}, "threadFlows": flows}]
    if f.replay is not None:
        res["properties"]["replay"] = f.replay
    if f.violation_set is not None:
        res["properties"]["violationSet"] = f.violation_set
    if getattr(f, "suppression", None):
        res["suppressions"] = [f.suppression]
    if getattr(f, "baseline_state", None):
        res["baselineState"] = f.baseline_state
    return res


def to_sarif(report: Report, metadata: dict[str, dict[str, str]], root: Path | None = None) -> dict:
    """The whole run as a SARIF log (only non-verified findings are results)."""
    lines = _Lines()
    rules = []
    for rid, meta in sorted(metadata.items()):
        if meta.get("kind") in ("library", "schema"):
            continue
        rule = {"id": rid, "name": rid.split("/")[-1],
                "shortDescription": {"text": meta.get("title", rid)[:1024]},
                "fullDescription": {"text": (meta.get("description") or meta.get("title", rid))[:1024]},
                "help": {"text": meta.get("help", meta.get("description", meta.get("title", rid)))},
                "defaultConfiguration": {"level": _LEVEL.get(meta.get("severity", "error"), "error")},
                "properties": {"tags": ["gpu", "data-flow"], "precision": "very-high"}}
        rules.append(rule)
    results = [_result(k, f, root, lines) for k in report.kernels for f in k.findings
               if f.verdict != Verdict.VERIFIED]
    notifications = [{"level": "error", "message": {"text": e.message},
                      **({"locations": [_location(e.location, root)]} if e.location else {})}
                     for e in report.errors]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ave", "semanticVersion": __version__, "version": __version__,
                                "informationUri": "https://github.com/ave-decl/ave", "rules": rules}},
            "automationDetails": {"id": "ave/check/"},
            "invocations": [{"executionSuccessful": not report.errors, "exitCode": report.exit_code,
                             "toolExecutionNotifications": notifications}],
            "results": results,
        }],
    }
