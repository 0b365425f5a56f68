"""Human-readable output: rustc-style snippet and caret, the counterexample as a table, the chain as notes."""
from __future__ import annotations

from pathlib import Path

from ..lang.source import SourceFile, Span
from .model import ChainPoint, Counterexample, Finding, KernelReport, Report, Side, Verdict

_LEVEL = {Verdict.VIOLATION: "error", Verdict.UNKNOWN: "warning", Verdict.VERIFIED: "ok", Verdict.ERROR: "error"}


class _Sources:
    def __init__(self) -> None:
        self._cache: dict[str, SourceFile | None] = {}

    def get(self, path: str) -> SourceFile | None:
        if path not in self._cache:
            try:
                self._cache[path] = SourceFile(path, Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                self._cache[path] = None
        return self._cache[path]


def render(report: Report, sources: dict[str, SourceFile] | None = None, verbose: bool = False,
           timings: bool = True) -> str:
    """`timings=False` (`--no-timings`): no solver milliseconds in the `-v` lines."""
    cache = _Sources()
    for path, src in (sources or {}).items():
        cache._cache[path] = src
    out: list[str] = []
    for err in report.errors:
        out.append(err.rendered)
        out.append("")
    for k in report.kernels:
        out.extend(_kernel(k, cache, verbose, timings))
    s = report.summary()
    out.append(f"{len(report.kernels)} kernel(s): {s['verified']} verified, {s['violation']} with violations, "
               f"{s['unknown']} unknown, {s['error']} error(s)")
    return "\n".join(out) + "\n"


def _kernel(k: KernelReport, cache: _Sources, verbose: bool, timings: bool = True) -> list[str]:
    lines = [f"{k.verdict.value:9} {k.kernel} ({k.file})"]
    for f in k.findings:
        if f.verdict == Verdict.VERIFIED:
            if verbose:
                ms = f", {f.solver_ms:.0f} ms" if timings else ""
                lines.append(f"  ok: [{f.invariant}] {f.location}: {f.message} ({f.queries} queries{ms})")
            continue
        if f.severity != "error" and f.verdict == Verdict.VIOLATION and not verbose:
            # performance warnings: one line each; `-v` shows their counterexample
            lines.append(f"warning[{f.invariant}]: {f.location}: {f.message}")
            continue
        lines.extend(_finding(f, cache))
    if k.unchecked:
        lines.append(f"note: {k.unchecked} obligation(s) not decided after the first errors (--max-errors)")
    lines.append("")
    return lines


def _finding(f: Finding, cache: _Sources) -> list[str]:
    level = "warning" if f.severity != "error" and f.verdict == Verdict.VIOLATION else _LEVEL[f.verdict]
    lines = [f"{level}[{f.invariant}]: {f.title}: {f.message}", f"  --> {f.location}"]
    src = cache.get(f.location.file)
    if src is not None:
        loc = f.location
        snippet = src.snippet(Span(loc.file, loc.line, loc.col, loc.end_line, loc.end_col))
        lines.extend("  " + s for s in snippet.splitlines())
    if f.counterexample is not None:
        lines.extend(_table(f.counterexample))
        if f.violation_set is not None:
            lines.append(f"  = violating: {f.violation_set['description']}")
        if f.replay is not None:
            verdict = "confirmed by replay" if f.replay["confirmed"] else "NOT confirmed by replay (so UNKNOWN)"
            lines.append(f"  = {verdict}: {f.replay['detail']}")
        if f.fix_hint is not None:
            lines.append(f"  = help: {f.fix_hint['message']}")
        lines.extend(_chain(f.counterexample.lhs, cache))
        lines.extend(_chain(f.counterexample.rhs, cache))
    elif f.reason and f.reason not in f.message:
        lines.append(f"  = note: {f.reason}")
    lines.append("")
    return lines


def _table(c: Counterexample) -> list[str]:
    rows = counterexample_rows(c)
    width = max(len(r[0]) for r in rows)
    out = ["  = counterexample:"]
    out += [f"      {name:<{width}} | {value}" for name, value in rows]
    return out


def counterexample_rows(c: Counterexample) -> list[tuple[str, str]]:
    """The counterexample as (name, value) rows: the text table, also the HTML report's."""
    rows = [
        ("block", ", ".join(map(str, c.block))),
        ("thread", f"{c.thread_linear} ({c.group_kind} {c.group_index}, lane {c.lane})"),
    ]
    if c.iterations:
        rows.append(("iteration", ", ".join(f"{k}={v}" for k, v in c.iterations.items())))
    if c.value_index is not None:
        rows.append(("value index", str(c.value_index)))
    if c.instruction:
        rows.append(("instruction", ", ".join(f"{k}={v}" for k, v in c.instruction.items())))
    if c.sizes:
        rows.append(("sizes", ", ".join(f"{k}={v}" for k, v in c.sizes.items())))
    if c.index_tables:
        rows.append(("index tensors", ", ".join(f"{name}[{', '.join(map(str, e[:-1]))}]={e[-1]}"
                                                for name, entries in c.index_tables.items() for e in entries)))
    for side in (c.lhs, c.rhs):
        if side.kind == "index":
            rows.append((side.label, str(tuple(side.coordinates))))
            continue
        if side.kind == "path":  # the arm of an `if` a thread takes, and the barriers it reaches there
            thread = side.chain[0].thread if side.chain else None
            what = side.chain[0].note if side.chain else ""
            if what.startswith("takes"):
                what += f", reaches {side.tag[0]} barrier(s)"
            rows.append((side.label, f"thread {thread} (lane {side.lane}): {what}"))
            continue
        if side.kind == "access":
            thread = side.chain[0].thread if side.chain else None
            rows.append((side.label, f"thread {thread} (lane {side.lane}): {side.tag_name}{tuple(side.coordinates)}"))
            continue
        where = []
        if side.lane is not None and c.instruction:
            where.append(f"lane {side.lane}")
        if side.value_index is not None and c.instruction:
            where.append(f"value {side.value_index}")
        tag = f"{side.tag_name}{tuple(side.tag)}" if side.tag else "Top (untagged)"
        coords = f" at coordinates {tuple(side.coordinates)}" if side.coordinates else ""
        rows.append((side.label, f"{' '.join(where)}{': ' if where else ''}tag {tag}{coords}"))
    rows.append(("fails", c.relation))
    return rows


def _chain(side: Side, cache: _Sources) -> list[str]:
    if not side.chain:
        return []
    out = [f"  = note: chain of the {side.label}:"]
    for p in side.chain:
        out.append(f"      {_point(p, cache)}")
    return out


_POINT_LABELS = {"use": "use", "load": "load", "store": "store", "source": "tagged source", "mma-operand": "operand",
                 "branch": "branch", "barrier": "barrier"}


def _point(p: ChainPoint, cache: _Sources) -> str:
    src = cache.get(p.location.file)
    return f"{point_text(p)}: {src.line_text(p.location.line).strip() if src else ''}"


def point_text(p: ChainPoint) -> str:
    """One chain step without its source line, e.g. `store As at f.ave:25:13 [thread 128, kt=0]`
    (shared with the pictures and the HTML report, which show the line apart)."""
    iters = ", ".join(f"{k}={v}" for k, v in p.iterations.items())
    who = f"thread {p.thread}" if p.thread is not None else ""
    ctx = ", ".join(x for x in (who, iters, p.note) if x)
    label = _POINT_LABELS.get(p.kind, p.kind)
    buf = f" {p.buffer}" if p.buffer and p.kind not in ("use",) else ""
    return f"{label}{buf} at {p.location} [{ctx}]"


def render_timings(report: Report) -> str:
    """`--time`: milliseconds per phase for every kernel, and the totals."""
    phases = ["parse", "facts", "fixpoint", "solving", "replay"]
    rows = [f"{'kernel':40} " + " ".join(f"{p:>9}" for p in phases)]
    totals = dict.fromkeys(phases, 0.0)
    for k in report.kernels:
        cells = []
        for p in phases:
            v = k.timings_ms.get(p, 0.0)
            totals[p] += v
            cells.append(f"{v:9.1f}")
        rows.append(f"{(k.kernel + ' (' + Path(k.file).name + ')')[:40]:40} " + " ".join(cells))
    rows.append(f"{'total (ms)':40} " + " ".join(f"{totals[p]:9.1f}" for p in phases))
    return "\n".join(rows)
