"""`ave draw finding`: a finding's exact violating set as a heatmap, with the counterexample's cell
marked and the store→load→use chain beside it.

The violating cells are the points of the report's `violation_set` (its Espresso cubes expanded
back into points), so the picture shows the very set `ave check --json` reports. Violating cells
are vermillion *and* hatched, the counterexample's cell has a heavy outline and a ring: nothing is
told by colour alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from ..hw.instructions import Instruction
from ..lang.errors import UsageError
from ..lang.operand_maps import slot_maps
from ..lang.source import SourceFile
from ..report.model import Finding, KernelReport, Verdict
from ..report.text import point_text
from .grid import Cell, Grid, draw_grid, legend
from .svg import CLEAN, Canvas, xml_text

WRAP_LANES = 32  # lanes per row when only the counterexample's lanes are drawn


# ------------------------------------------------------------------ numbering
def numbered_findings(kernels: list[KernelReport]) -> list[tuple[int, KernelReport, Finding]]:
    """The reported (not VERIFIED) findings of a file, numbered from 1: those that decide the verdict
    first, then performance warnings and suppressed ones, each in report order. `ave draw finding
    --finding N` and the HTML report use these numbers."""
    found = [(k, f) for k in kernels for f in k.findings if f.verdict != Verdict.VERIFIED]
    ordered = [x for x in found if x[1].counts] + [x for x in found if not x[1].counts]
    return [(n, k, f) for n, (k, f) in enumerate(ordered, 1)]


def heading_level(f: Finding) -> str:
    """The level `ave check` prints before a reported finding (report/text.py): a performance
    warning's violation and an UNKNOWN are warnings, any other violation and an ERROR are errors."""
    warning = (f.severity != "error" and f.verdict == Verdict.VIOLATION) or f.verdict == Verdict.UNKNOWN
    return "warning" if warning else "error"


def pick_finding(kernels: list[KernelReport], number: int, file: str) -> tuple[KernelReport, Finding]:
    """Finding `number` of a file; UsageError when there is none such."""
    numbered = numbered_findings(kernels)
    if not 1 <= number <= len(numbered):
        have = f"findings 1-{len(numbered)}" if numbered else "no findings"
        raise UsageError(f"--finding {number}: {file} has {have}")
    _, k, f = numbered[number - 1]
    if f.counterexample is None:
        raise UsageError(f"--finding {number}: {f.invariant} ({f.verdict.value}) at {f.location} has no "
                         "counterexample to draw" + (f": {f.reason}" if f.reason else ""))
    return k, f


# ------------------------------------------------------------ the violating set
def cube_values(spec: str, size: int) -> list[int]:
    """The values one Espresso cube allows a variable (solver/violation_set.py's notation: `any`,
    `5`, `4-7`, `bits 1xx0 (MSB first)`), within 0..size-1."""
    if spec == "any":
        return list(range(size))
    if spec.startswith("bits "):
        bits = spec.split()[1]
        return [v for v in range(size) if all(p in ("x", b) for p, b in zip(bits, format(v, f"0{len(bits)}b")))]
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def violating_points(vs: dict, sizes: list[int]) -> set[tuple[int, ...]]:
    """Every point of a reported violation set (the union of its cubes)."""
    points: set[tuple[int, ...]] = set()
    for cube in vs["cubes"]:
        axes = [cube_values(cube[name], size) for name, size in zip(vs["variables"], sizes)]
        points.update(product(*axes))
    return points


@dataclass
class Axes:
    """How a finding's points lie on the grid."""

    names: list[str]  # the violation set's variables, or ["lane"] without a set
    sizes: list[int]
    marked: tuple[int, ...]  # the counterexample's point


def axes_of(f: Finding, block_threads: int | None) -> Axes | None:
    """The sizes of the violation set's variables (None when they cannot be told: no set, or a
    (thread, value) set of a kernel whose block shape is symbolic)."""
    vs, c = f.violation_set, f.counterexample
    if vs is None or c is None:
        return None
    names, total = list(vs["variables"]), vs["total"]
    if names == ["lane", "value"]:
        sizes = [c.group_size, total // c.group_size]
        marked = (c.lhs.lane if c.lhs.lane is not None else c.lane, c.lhs.value_index or 0)
    elif names == ["thread"]:
        sizes, marked = [total], (c.thread_linear,)
    elif names == ["thread", "value"] and block_threads:
        sizes, marked = [block_threads, total // block_threads], (c.thread_linear, c.value_index or 0)
    else:
        return None
    if sizes[0] * (sizes[1] if len(sizes) > 1 else 1) != total:
        return None
    return Axes(names, sizes, marked)


# ------------------------------------------------------------------- the picture
def heatmap(cv: Canvas, f: Finding, axes: Axes | None, instr: Instruction | None) -> Grid:
    """The grid: (lane, value) or (thread, value) rows x slots, threads as waves x lanes, or, with
    no violation set, the lanes of the counterexample's wave with its lanes marked."""
    c = f.counterexample
    assert c is not None
    if axes is None:
        lanes = {x for x in (c.lane, c.lhs.lane, c.rhs.lane) if x is not None}
        wrap = min(WRAP_LANES, c.group_size)
        cells = [[Cell(str(r * wrap + j), CLEAN, "clean", {"lane": r * wrap + j}, f"lane {r * wrap + j}",
                       marked=r * wrap + j in lanes) for j in range(wrap)] for r in range(c.group_size // wrap)]
        why = "no violation set" if f.violation_set is None else "a violation set this grid cannot lay out"
        return Grid(cells, [str(r * wrap) for r in range(len(cells))], [], f"lanes of {c.group_kind} {c.group_index} "
                    f"({why}: the counterexample's lanes are marked)", "lane", "", 24, 16)
    assert f.violation_set is not None
    points = violating_points(f.violation_set, axes.sizes)
    labels = slot_maps(instr.a, instr.group_size) if instr is not None and axes.names == ["lane", "value"] \
        and axes.sizes == [instr.group_size, instr.a.values] else None

    complete = f.violation_set["complete"]

    def cell(point: tuple[int, ...], data: dict[str, int]) -> Cell:
        where = ", ".join(f"{k} {v}" for k, v in data.items())
        label = f"{labels[0][point]},{labels[1][point]}" if labels is not None else ""
        if point in points:
            fill, kind, state = cv.hatch, "violating", "violates"
        elif complete:
            fill, kind, state = CLEAN, "clean", "holds"
        else:  # the enumeration's budget ran out: this point was not decided either way
            fill, kind, state = cv.dots, "undecided", "not enumerated (may violate)"
        return Cell(label, fill, kind, data, f"{where}: {state}" + (f" (A row, k = {label})" if label else ""),
                    marked=point == axes.marked)

    if axes.names == ["thread"]:
        g = c.group_size
        rows = -(-axes.sizes[0] // g)
        cells = [[cell((r * g + j,), {"thread": r * g + j}) for j in range(min(g, axes.sizes[0] - r * g))]
                 for r in range(rows)]
        return Grid(cells, [f"{c.group_kind} {r}" for r in range(rows)], [str(j) for j in range(g)],
                    "threads of the block", c.group_kind, "lane", 16, 16)
    if axes.names == ["thread", "value"]:  # lanes down, (wave, slot) across: a wave's slots side by side
        g, slots = c.group_size, axes.sizes[1]
        waves = -(-axes.sizes[0] // g)
        cells = [[cell((w * g + lane, v), {"thread": w * g + lane, "slot": v})
                  for w in range(waves) for v in range(slots) if w * g + lane < axes.sizes[0]] for lane in range(g)]
        return Grid(cells, [str(lane) for lane in range(g)],
                    [f"{w}:{v}" for w in range(waves) for v in range(slots)],
                    f"threads × register slot (thread = {c.group_kind} · {g} + lane)", "lane",
                    f"{c.group_kind}:slot", 24, 13)
    cells = [[cell((i, v), {"lane": i, "slot": v}) for v in range(axes.sizes[1])] for i in range(axes.sizes[0])]
    title = "A operand: lane × slot" + (" (cell: A row, k)" if labels is not None else "")
    return Grid(cells, [str(i) for i in range(axes.sizes[0])], [str(v) for v in range(axes.sizes[1])], title,
                "lane", "slot", 36 if labels is not None else 24, 13)


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


def finding_canvas(number: int, f: Finding, source: SourceFile | None, block_threads: int | None,
                   prefix: str = "finding", bare: bool = False) -> Canvas:
    """The whole picture: header, heatmap with legend, and the chain of each side beside it;
    `bare`: the heatmap and legend only (the HTML report shows the rest as text beside it)."""
    c = f.counterexample
    if c is None:
        raise UsageError(f"finding {number} has no counterexample to draw")
    from .kernel_info import instruction_at

    cv = Canvas(prefix)
    axes = axes_of(f, block_threads)
    y = 0.0
    if not bare:
        cv.text(8, 16, f"#{number} {heading_level(f)}[{f.invariant}] {f.location}", 12, font_weight="bold")
        y = 32.0
        for line in _wrap(f"{f.title}: {f.message}", 120):
            cv.text(8, y, line, 10.5)
            y += 14
    if f.violation_set is not None and not bare:
        cv.text(8, y, f"violating: {f.violation_set['description']}", 10.5, class_="violation-description")
        y += 14
    instr = instruction_at(source, f.location.line, f.location.end_line) if axes and axes.names[0] == "lane" else None
    grid = heatmap(cv, f, axes, instr)
    top = y + 6
    w, h = draw_grid(cv, 8, top, grid, "heatmap")
    if axes is None:
        entries = [(CLEAN, "a lane (" + ("this finding has no violation set" if f.violation_set is None
                                         else "the violation set is described above, not drawn") + ")", False),
                   (CLEAN, "a lane of the counterexample (outlined, ring)", True)]
    elif f.violation_set is not None and not f.violation_set["complete"]:
        entries = [(cv.hatch, "violates (hatched)", False),
                   (cv.dots, "not enumerated: the enumeration budget ran out, may violate (dotted)", False),
                   (cv.hatch, "the counterexample (outlined, ring)", True)]
    else:
        entries = [(cv.hatch, "violates (hatched)", False), (CLEAN, "holds", False),
                   (cv.hatch, "the counterexample (outlined, ring)", True)]
    legend(cv, 8, top + h + 12, entries)
    summary = f.violation_set["description"] if f.violation_set is not None else "no violation set"
    cv.root.set("role", "img")
    cv.root.set("aria-label", xml_text(f"finding {number}, {f.invariant}: {summary}"))
    x = 8 + w + 30
    ty = top + 12
    for side in (c.lhs, c.rhs):
        if not side.chain or bare:
            continue
        cv.text(x, ty, f"chain of the {side.label}:", 11, font_weight="bold")
        ty += 16
        group = cv.group(class_="chain")
        for i, p in enumerate(side.chain, 1):
            cv.text(x, ty, f"{i}. {point_text(p)}", 10, group, class_="chain-step")
            ty += 13
            if source is not None and p.location.file == source.path:
                cv.text(x + 22, ty, source.line_text(p.location.line).strip()[:110], 10, group, fill="#444444")
                ty += 15
        ty += 8
    return cv
