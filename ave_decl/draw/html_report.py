"""`ave audit --html DIR`: one static `index.html` (no server, no external assets, works from a
file:// URL): files and verdicts, then every finding with its source snippet, counterexample
table, chain as a step list and heatmap; filters by verdict, invariant and warnings.

Built as an ElementTree, so every kernel name, message and source line is escaped; no timings and
no dates, so the same report gives the same bytes.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from ..lang.errors import AveError
from ..lang.source import SourceFile, Span
from ..report.model import ErrorReport, Finding, KernelReport, Report, Side, Verdict
from ..report.text import counterexample_rows, point_text
from .finding_picture import finding_canvas, heading_level, numbered_findings
from .kernel_info import kernels_of
from .output import write_atomic
from .svg import xml_text

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1b1b;background:#fff}
header{position:sticky;top:0;background:#fafafa;border-bottom:1px solid #ddd;padding:10px 24px;z-index:2}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}h3{font-size:15px;margin:0 0 6px}
main{padding:0 24px 40px}
#filters{display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center;margin-top:6px}
#filters label{white-space:nowrap}
table{border-collapse:collapse}td,th{border:1px solid #d4d4d4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
.verdict{font-weight:600;padding:0 6px;border-radius:3px;border:1px solid}
.v-VERIFIED{color:#00593f;border-color:#009e73}.v-VIOLATION{color:#8a2f00;border-color:#d55e00}
.v-UNKNOWN{color:#5b4a00;border-color:#b59a00}.v-ERROR{color:#6b1d5b;border-color:#cc79a7}
.v-VIOLATION::before{content:"\\2716  "}.v-VERIFIED::before{content:"\\2714  "}
.v-UNKNOWN::before{content:"?  "}.v-ERROR::before{content:"!  "}
.finding{border:1px solid #d4d4d4;border-left:6px solid #999;border-radius:4px;padding:10px 14px;margin:14px 0}
.finding.level-error{border-left-color:#d55e00;border-left-style:double}
.finding.level-warning{border-left-color:#999;border-left-style:dashed}
pre{background:#f6f6f6;padding:6px 8px;overflow-x:auto;margin:6px 0;font-size:12.5px}
.counterexample td:first-child{font-weight:600;white-space:nowrap}
.chains{display:flex;flex-wrap:wrap;gap:8px 32px}.chains ol{margin:4px 0;padding-left:22px}
.chains code{font-size:12.5px}.chains .line{color:#555;font-family:monospace;font-size:12px}
.finding-body{display:flex;flex-wrap:wrap;gap:12px 28px;align-items:flex-start}
.finding-body>div{flex:1 1 520px;min-width:0}
.chains{flex-direction:column}
figure{margin:0;overflow-x:auto;max-width:100%}
[hidden]{display:none!important}
#shown{color:#444}
"""

_JS = """
function applyFilters(){
  const verdicts=new Set([...document.querySelectorAll('.verdict-filter:checked')].map(e=>e.value));
  const inv=document.getElementById('invariant-filter').value;
  const warnings=document.getElementById('warnings-filter').checked;
  let rows=0,findings=0;
  for(const r of document.querySelectorAll('tr.kernel-row')){
    const ok=verdicts.has(r.dataset.verdict)&&(!inv||r.dataset.invariants.split(' ').includes(inv));
    r.hidden=!ok;if(ok)rows++;}
  for(const f of document.querySelectorAll('article.finding')){
    const ok=verdicts.has(f.dataset.verdict)&&(!inv||f.dataset.invariant===inv)
      &&(warnings||f.dataset.level!=='warning');
    f.hidden=!ok;if(ok)findings++;}
  document.getElementById('shown').textContent=rows+' row(s), '+findings+' finding(s) shown';
}
document.addEventListener('change',e=>{if(e.target.closest('#filters'))applyFilters();});
applyFilters();
"""

_VERDICTS = ["VIOLATION", "UNKNOWN", "ERROR", "VERIFIED"]


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    """A child element; its text and attribute values cleared of what XML cannot hold (ElementTree
    escapes markup but writes control characters and lone surrogates as they are)."""
    el = ET.SubElement(parent, tag, {k.rstrip("_").replace("_", "-"): xml_text(v) for k, v in attrs.items()})
    if text is not None:
        el.text = xml_text(text)
    return el


class _Sources:
    """Each kernel file read once (None when it cannot be read now: the report still renders)."""

    def __init__(self) -> None:
        self.files: dict[str, SourceFile | None] = {}
        self.threads: dict[tuple[str, str], int | None] = {}

    def get(self, path: str) -> SourceFile | None:
        if path not in self.files:
            try:
                self.files[path] = SourceFile.read(path)
            except (AveError, OSError):
                self.files[path] = None
        return self.files[path]

    def block_threads(self, path: str, kernel: str) -> int | None:
        if (path, kernel) not in self.threads:
            src = self.get(path)
            try:
                infos = kernels_of(src) if src is not None else []
            except (AveError, RecursionError):
                infos = []
            for info in infos:
                self.threads[(path, info.name)] = info.block_threads
        return self.threads.get((path, kernel))


def _level(f: Finding) -> str:
    """What the warnings filter reads: "error" when the finding decides the verdict."""
    return "error" if f.severity == "error" and f.verdict != Verdict.VERIFIED and f.suppression is None else "warning"


def _filters(header: ET.Element, report: Report, invariants: list[str]) -> None:
    form = _el(header, "form", id="filters")
    counts = Counter(k.verdict.value for k in report.kernels) + Counter("ERROR" for e in report.errors if e.counts)
    _el(form, "strong", "Verdict:")
    for v in _VERDICTS:
        label = _el(form, "label")
        _el(label, "input", type="checkbox", class_="verdict-filter", value=v, checked="checked")
        _el(label, "span", f"{v} ({counts.get(v, 0)})", class_=f"verdict v-{v}").tail = ""
    label = _el(form, "label", "Invariant: ")
    select = _el(label, "select", id="invariant-filter")
    _el(select, "option", "all", value="")
    for name in invariants:
        _el(select, "option", name, value=name)
    label = _el(form, "label")
    _el(label, "input", type="checkbox", id="warnings-filter", checked="checked").tail = " performance warnings"
    _el(form, "span", "", id="shown")


def _kernel_row(tbody: ET.Element, k: KernelReport, anchor: str | None) -> None:
    reported = [f for f in k.findings if f.verdict != Verdict.VERIFIED]
    tr = _el(tbody, "tr", class_="kernel-row", data_verdict=k.verdict.value,
             data_invariants=" ".join(sorted({f.invariant for f in reported})))
    _el(tr, "td", k.file)
    td = _el(tr, "td")
    if anchor:
        _el(td, "a", k.kernel, href=f"#{anchor}")
    else:
        td.text = k.kernel
    _el(_el(tr, "td"), "span", k.verdict.value, class_=f"verdict v-{k.verdict.value}")
    levels = Counter(heading_level(f) for f in reported)  # as the headings (and `ave check`) say
    _el(tr, "td", ", ".join(f"{n} {lv}(s)" for lv, n in sorted(levels.items())) or "—")


def _error_row(tbody: ET.Element, e: ErrorReport) -> None:
    """A file's error; a time-out is the row of the file's UNKNOWN verdict, with its reason."""
    verdict = "ERROR" if e.counts else "UNKNOWN"
    tr = _el(tbody, "tr", class_="kernel-row", data_verdict=verdict, data_invariants="")
    _el(tr, "td", e.file)
    _el(tr, "td", "—")
    _el(_el(tr, "td"), "span", verdict, class_=f"verdict v-{verdict}")
    _el(tr, "td", f"{e.kind} error (exit {e.exit_code}): {e.rendered.splitlines()[0] if e.rendered else e.message}")


def _chain(parent: ET.Element, side: Side, src: SourceFile | None) -> None:
    box = _el(parent, "div", class_="chain")
    _el(box, "h4", f"chain of the {side.label}")
    ol = _el(box, "ol")
    for p in side.chain:
        li = _el(ol, "li", class_="chain-step")
        _el(li, "code", point_text(p))
        if src is not None and p.location.file == src.path:
            _el(li, "div", src.line_text(p.location.line).strip(), class_="line")


def _finding(main: ET.Element, number: int, k: KernelReport, f: Finding, sources: _Sources, anchor: str) -> None:
    level = _level(f)
    art = _el(main, "article", class_=f"finding level-{level}", id=anchor, data_verdict=k.verdict.value,
              data_invariant=f.invariant, data_level=level, data_number=str(number), data_file=k.file)
    _el(art, "h3", f"#{number} {heading_level(f)}[{f.invariant}] {k.kernel} — {f.location}")
    _el(art, "p", f"{f.title}: {f.message}", class_="message")
    if f.suppression is not None:
        _el(art, "p", f"suppressed ({f.suppression.get('kind', '')}): {f.suppression.get('justification', '')}")
    src = sources.get(f.location.file)
    if src is not None:
        loc = f.location
        _el(art, "pre", src.snippet(Span(loc.file, loc.line, loc.col, loc.end_line, loc.end_col)), class_="snippet")
    c = f.counterexample
    if c is None:
        if f.reason and f.reason not in f.message:
            _el(art, "p", f.reason, class_="reason")
        return
    columns = _el(art, "div", class_="finding-body")
    text = _el(columns, "div")
    table = _el(text, "table", class_="counterexample")
    for name, value in counterexample_rows(c):
        tr = _el(table, "tr")
        _el(tr, "td", name)
        _el(tr, "td", value)
    if f.violation_set is not None:
        _el(text, "p", f"violating: {f.violation_set['description']}", class_="violating")
    if f.fix_hint is not None:
        _el(text, "p", f"help: {f.fix_hint['message']}", class_="hint")
    chains = _el(text, "div", class_="chains")
    for side in (c.lhs, c.rhs):
        if side.chain:
            _chain(chains, side, src)
    threads = sources.block_threads(k.file, k.kernel) if f.violation_set is not None and \
        f.violation_set["variables"] == ["thread", "value"] else None
    figure = _el(columns, "figure", class_="heatmap")
    figure.append(finding_canvas(number, f, src, threads, prefix=anchor, bare=True).element())


def report_html(report: Report, title: str = "Ave audit report") -> str:
    """The whole page as text (an HTML5 document)."""
    sources = _Sources()
    html = ET.Element("html", {"lang": "en"})
    head = _el(html, "head")
    _el(head, "meta", charset="utf-8")
    _el(head, "title", title)
    _el(head, "style", _CSS)
    body = _el(html, "body")
    header = _el(body, "header")
    _el(header, "h1", title)
    s = report.summary()
    _el(header, "p", f"{len(report.kernels)} kernel(s): {s['verified']} verified, {s['violation']} with violations, "
                     f"{s['unknown']} unknown, {s['error']} error(s), {s['suppressed']} suppressed "
                     f"(exit code {report.exit_code})", class_="summary")
    by_file: dict[str, list[KernelReport]] = {}
    for k in report.kernels:
        by_file.setdefault(k.file, []).append(k)
    numbered = [(n, k, f) for kernels in by_file.values() for n, k, f in numbered_findings(kernels)]
    _filters(header, report, sorted({f.invariant for _, _, f in numbered}))
    main = _el(body, "main")
    _el(main, "h2", "Files")
    table = _el(main, "table", id="kernels")
    head_row = _el(_el(table, "thead"), "tr")
    for name in ("file", "kernel", "verdict", "findings"):
        _el(head_row, "th", name)
    tbody = _el(table, "tbody")
    for e in report.errors:
        _error_row(tbody, e)
    first_anchor: dict[int, str] = {}
    for i, (n, k, f) in enumerate(numbered):
        first_anchor.setdefault(id(k), f"finding-{i + 1}")
    timed_out = {e.file for e in report.errors if not e.counts}
    for k in report.kernels:
        if not (k.kernel == "<file>" and k.file in timed_out):  # its error row says it, and why
            _kernel_row(tbody, k, first_anchor.get(id(k)))
    _el(main, "h2", "Findings")
    if not numbered:
        _el(main, "p", "No findings.")
    for i, (n, k, f) in enumerate(numbered):
        _finding(main, n, k, f, sources, f"finding-{i + 1}")
    _el(body, "script", _JS)
    return "<!DOCTYPE html>\n" + ET.tostring(html, encoding="unicode", method="html") + "\n"


def write_report(report: Report, directory: Path) -> Path:
    """Write DIR/index.html (the directory is created; the file is replaced atomically)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from ..lang.errors import UsageError

        raise UsageError(f"--html: cannot create {directory}: {exc.strerror}") from None
    path = directory / "index.html"
    write_atomic(path, report_html(report).encode("utf-8"))
    return path
