"""Fingerprints, inline suppressions (`# ave: ignore[rule-id] reason`) and baselines.

A suppressed finding stays in every report (with `suppression`), but no longer decides the
kernel's verdict or the exit code; summaries count it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..lang.source import SourceFile
from .model import Finding, Report, Verdict
from .sarif import fingerprint

_IGNORE = re.compile(r"#\s*ave:\s*ignore\[(?P<rules>[^\]]*)\]\s*(?P<reason>.*)$")


def annotate(findings: list[Finding], kernel: str, source: SourceFile) -> None:
    """Fingerprint every finding; apply `# ave: ignore[...]` on the site line or the line above."""
    for f in findings:
        line = source.line_text(f.location.line)
        # a helper line inlined at two calls is two sites: the call lines take part
        calls = [source.line_text(c["line"]) for c in f.location.called_from]
        f.fingerprint = fingerprint(f.invariant, kernel, "\x1e".join([line, *calls]))
        if f.verdict != Verdict.VERIFIED:
            f.suppression = in_source_suppression(f, source)


def in_source_suppression(f: Finding, source: SourceFile) -> dict | None:
    """The `# ave: ignore[...]` comment naming the finding's invariant on its site line or the
    line above (or on a call line of the helper it is inlined from), as a suppression record."""
    lines = [f.location.line, *(c["line"] for c in f.location.called_from)]
    for text in (source.line_text(n) for at in lines for n in (at, at - 1)):
        m = _IGNORE.search(text)
        if m and any(r.strip() in (f.invariant, "*") for r in m.group("rules").split(",")):
            return {"kind": "inSource", "justification": m.group("reason").strip() or "ave: ignore"}
    return None


def write_baseline(report: Report, path: Path) -> int:
    prints = sorted({f.fingerprint for k in report.kernels for f in k.findings if f.verdict != Verdict.VERIFIED})
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "tool": "ave", "fingerprints": prints}, indent=1) + "\n")
    tmp.replace(path)
    return len(prints)


def apply_baseline(report: Report, path: Path) -> None:
    known = set(json.loads(path.read_text())["fingerprints"])
    for k in report.kernels:
        for f in k.findings:
            if f.verdict == Verdict.VERIFIED:
                continue
            if f.fingerprint in known:
                f.baseline_state = "unchanged"
                f.suppression = f.suppression or {"kind": "external", "justification": "in the baseline"}
            else:
                f.baseline_state = "new"
