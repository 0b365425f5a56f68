"""The one picture primitive: a labelled grid of cells (layouts, operand maps, violating sets).

Every cell is a `<rect class="cell ...">` with `data-*` coordinates, so tests and the HTML report's
script read the picture's meaning from the SVG itself (e.g. the violating cells of a heatmap).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .svg import CLEAN, Canvas, ink


@dataclass
class Cell:
    label: str = ""
    fill: str = CLEAN
    kind: str = ""  # extra class: "violating", "clean", ...
    data: dict[str, int] = field(default_factory=dict)
    tooltip: str = ""
    marked: bool = False  # the counterexample's cell: a heavy outline and a ring, not colour alone


@dataclass
class Grid:
    cells: list[list[Cell]]  # rows of cells
    row_labels: list[str]
    col_labels: list[str]
    title: str = ""
    row_axis: str = ""  # e.g. "lane"
    col_axis: str = ""
    cell_w: float = 34
    cell_h: float = 16
    font: float = 8.5


def draw_grid(cv: Canvas, x: float, y: float, g: Grid, css_class: str = "grid") -> tuple[float, float]:
    """Draw `g` with its top-left corner at (x, y); returns (width, height) used."""
    group = cv.group(class_=css_class)
    label_w = max([len(s) for s in g.row_labels] + [len(g.row_axis), 1]) * 6.2 + 8
    top = y
    if g.title:
        cv.text(x, top + 12, g.title, 12, group, font_weight="bold")
        top += 20
    if g.col_axis:
        cv.text(x + label_w, top + 9, f"{g.col_axis} →", 9, group)
        top += 12
    if g.row_axis:
        cv.text(x, top + 9, f"{g.row_axis} ↓", 9, group)
    col_step = max(1, -(-len(max(g.col_labels, key=len, default="")) * 5.6 // g.cell_w)) if g.col_labels else 1
    for j, lab in enumerate(g.col_labels):
        if j % col_step == 0:
            cv.text(x + label_w + j * g.cell_w + g.cell_w / 2, top + 9, lab, 8, group, anchor="middle")
    top += 13
    marks = []
    for i, row in enumerate(g.cells):
        cy = top + i * g.cell_h
        if i < len(g.row_labels):
            cv.text(x + label_w - 4, cy + g.cell_h / 2 + 3, g.row_labels[i], 8, group, anchor="end")
        for j, c in enumerate(row):
            cx = x + label_w + j * g.cell_w
            data = {f"data-{k}": v for k, v in c.data.items()}
            rect = cv.rect(cx, cy, g.cell_w, g.cell_h, c.fill, group, stroke="#9a9a9a", stroke_width=0.5,
                           class_=" ".join(["cell"] + [k for k in (c.kind, "counterexample" if c.marked else "")
                                                       if k]), **data)
            if c.tooltip:
                cv.title(rect, c.tooltip)
            if c.label:
                plain = c.fill.startswith("#")
                if not plain:  # a pattern fill (the hatch): the label sits on a white plate
                    pw = len(c.label) * g.font * 0.62 + 3
                    cv.rect(cx + (g.cell_w - pw) / 2, cy + 2.5, pw, g.cell_h - 5, "#ffffff", group, rx=1.5)
                cv.text(cx + g.cell_w / 2, cy + g.cell_h / 2 + g.font * 0.35, c.label, g.font, group,
                        anchor="middle", fill=ink(c.fill) if plain else "#000000")
            if c.marked:
                marks.append((cx, cy))
    for cx, cy in marks:  # drawn last, so neighbouring cells never cover the outline
        cv.rect(cx - 1.5, cy - 1.5, g.cell_w + 3, g.cell_h + 3, "none", group, stroke="#000000", stroke_width=3,
                class_="cx-mark")
        cv.add("circle", {"cx": cx + g.cell_w - 4, "cy": cy + 4, "r": 3.2, "fill": "#ffffff", "stroke": "#000000",
                          "stroke-width": 1.5}, group)
    rows = len(g.cells)
    cols = max((len(r) for r in g.cells), default=0)
    return max(label_w + cols * g.cell_w, len(g.title) * 12 * 0.62), top - y + rows * g.cell_h


def legend(cv: Canvas, x: float, y: float, entries: list[tuple[str, str, bool]]) -> float:
    """Swatches with their meaning, one per line: (fill, text, marked); returns the height used."""
    group = cv.group(class_="legend")
    for i, (fill, text, marked) in enumerate(entries):
        cy = y + i * 18
        cv.rect(x, cy, 22, 13, fill, group, stroke="#000000" if marked else "#9a9a9a",
                stroke_width=3 if marked else 0.5)
        if marked:
            cv.add("circle", {"cx": x + 18, "cy": cy + 4, "r": 3.2, "fill": "#ffffff", "stroke": "#000000",
                              "stroke-width": 1.5}, group)
        cv.text(x + 30, cy + 10, text, 10.5, group)
    return len(entries) * 18
