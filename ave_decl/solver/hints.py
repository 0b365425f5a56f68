"""Where the missing statement belongs (issue 19, item 7).

A race or an exposed async copy is reported at the two accesses that meet, but the bug is what
is *missing between them*: a `syncthreads()` or an `async_wait()`. A bounds violation is reported
at the access, but the fix is a mask on one of its indices. `fix_hint` computes, from the
statement structure and the counterexample's path, where that statement goes: between the end of
the earlier access's statement and the start of the later one's, at the innermost loop or `if`
level that contains both (a barrier inside a branch or an inner loop the other access is not in
would not order them), or, for a dependence carried around a loop, after the earlier access to
the end of the loop body (or at its top, before the later access).
"""
from __future__ import annotations

import re

from ..facts.view import KernelView
from ..lang.source import Span

CONTAINERS = ("for", "if")


def _contains(outer: Span, inner: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (
        outer.end_line, outer.end_col)


class StatementTree:
    """Loops and ifs of one kernel as nested spans (the facts number statements, the spans nest)."""

    def __init__(self, view: KernelView):
        self.view = view
        self.spans = {s: view.span(s) for s in view.stmts}
        self.containers = [s for s, (kind, _span) in view.stmts.items() if kind in CONTAINERS]

    def _around(self, s: int) -> list[int]:
        """Loops and ifs containing statement s, outermost first."""
        span = self.spans[s]
        out = [c for c in self.containers if c != s and _contains(self.spans[c], span)]
        return sorted(out, key=lambda c: (self.spans[c].line, self.spans[c].col, -self.spans[c].end_line))

    def common(self, a: int, b: int) -> int | None:
        """The innermost loop or if around both statements (None: the kernel body)."""
        both = [c for c in self._around(a) if c in set(self._around(b))]
        return both[-1] if both else None

    def child(self, level: int | None, s: int) -> int:
        """The statement directly inside `level` (or the body) that contains s (s itself if none)."""
        around = self._around(s)
        inside = around[around.index(level) + 1:] if level in around else around
        return inside[0] if inside else s

    def last_line(self, s: int) -> int:
        """The last source line of a statement (a compound one: of the last statement it holds)."""
        span = self.spans[s]
        lines = [t.line for t in self.spans.values() if _contains(span, t)]
        return max(lines + [span.line])


def fix_hint(view: KernelView, first_stmt: int, second_stmt: int, carried: bool, what: str) -> dict | None:
    """The hint for an ordering finding: `first_stmt` must be ordered before `second_stmt` by the
    statement `what` (e.g. "syncthreads()"); `carried`: on the counterexample's path they run in
    different iterations of a loop around both (the pair meets across its back edge)."""
    tree = StatementTree(view)
    level = tree.common(first_stmt, second_stmt)
    a, b = tree.child(level, first_stmt), tree.child(level, second_stmt)
    after = tree.last_line(a)
    path = view.span(first_stmt).path
    if not carried:
        before = view.span(b).line
        if after >= before:
            return None
        text = f"add {what} after line {after} and before line {before}"
        return {"message": text, "file": path, "start_line": after + 1, "end_line": before - 1}
    loop = level if level is not None and view.stmts[level][0] == "for" else None
    if loop is None:
        return None
    end, top, before = tree.last_line(loop), view.span(loop).line + 1, view.span(b).line
    rest = (f"after line {after}, at the end of the loop body" if after >= end else
            f"anywhere after line {after} up to the end of the loop body at line {end}")
    text = (f"add {what} at the top of the loop body, before line {before}, or {rest}: the two accesses meet "
            f"across the back edge of the loop at line {view.span(loop).line}")
    return {"message": text, "file": path, "start_line": top, "end_line": before - 1,
            "alternative": {"start_line": after + 1, "end_line": max(end, after + 1)}}


def bounds_hint(view: KernelView, stmt: int, buffer: str, coordinates: list[int], shape: list[int],
                source_line: str, is_load: bool) -> dict | None:
    """The hint for an out-of-bounds access: mask the index that leaves its extent."""
    dims = [d for d, (c, e) in enumerate(zip(coordinates, shape)) if c < 0 or c >= e]
    if not dims:
        return None
    d = dims[0]
    index = _index_text(source_line, buffer, d)
    extent = _extent_name(view, buffer, d) or str(shape[d])
    cond = f"{index} < {extent}" if coordinates[d] >= 0 else f"{index} >= 0"
    span = view.span(stmt)
    form = (f"load({buffer}[...], mask={cond}, other=0.0)" if is_load else f"store({buffer}[...], value, mask={cond})")
    text = f"mask this access of {buffer} on dimension {d}: {form}, or put it under `if {cond}:`"
    return {"message": text, "file": span.path, "start_line": span.line, "end_line": span.end_line}


def _index_text(line: str, buffer: str, dim: int) -> str:
    """The source text of index `dim` of the first `buffer[...]` on the line."""
    m = re.search(rf"\b{re.escape(buffer)}\[", line)
    if m is None:
        return f"index {dim}"
    depth, start, parts = 0, m.end(), []
    for i in range(m.end(), len(line)):
        ch = line[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                parts.append(line[start:i])
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(line[start:i])
            start = i + 1
    return parts[dim].strip() if dim < len(parts) else f"index {dim}"


def _extent_name(view: KernelView, buffer: str, dim: int) -> str | None:
    dims = view.dims.get(buffer, [])
    if dim >= len(dims):
        return None
    node = view.kf.table.nodes[dims[dim]]
    return node.name.split(":", 1)[1] if node.op == "sym" and node.name.startswith("size:") else None
