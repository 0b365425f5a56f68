"""`ave draw operands`: which lane and register slot of a matrix instruction holds which element of
A, B and C (the AMD matrix-instruction calculator's picture), from the same operand maps the
verifier, the simulator and the host target use (lang/operand_maps.py).
"""
from __future__ import annotations

import difflib

from ..hw.instructions import INSTRUCTIONS, Instruction, OperandMap
from ..lang.errors import UsageError
from ..lang.operand_maps import slot_maps
from .grid import Cell, Grid, draw_grid
from .svg import Canvas, sequential


def instruction(name: str) -> Instruction:
    """The library's instruction `name`; UsageError naming close ones."""
    if name not in INSTRUCTIONS:
        close = difflib.get_close_matches(name, sorted(INSTRUCTIONS), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(INSTRUCTIONS))}"
        raise UsageError(f"unknown instruction {name[:80]!r} ({hint})")
    return INSTRUCTIONS[name]


def operand_grid(instr: Instruction, operand: str, op: OperandMap) -> Grid:
    """Lanes x slots of one operand; each cell its (row, col) of the operand's matrix, the fill its
    K index for A and B (equal colours pair up) and its row for C."""
    rows, cols = slot_maps(op, instr.group_size)
    shade, steps = {"A": (cols, instr.k), "B": (rows, instr.k), "C": (rows, instr.m)}[operand]
    what = {"A": ("row", "k"), "B": ("k", "col"), "C": ("row", "col")}[operand]
    cells = [[Cell(f"{rows[lane, v]},{cols[lane, v]}", sequential(int(shade[lane, v]), steps),
                   data={"lane": lane, "slot": v, "row": int(rows[lane, v]), "col": int(cols[lane, v])},
                   tooltip=f"{operand} lane {lane} slot {v}: {what[0]} {rows[lane, v]}, {what[1]} {cols[lane, v]}")
              for v in range(op.values)] for lane in range(instr.group_size)]
    dims = {"A": (instr.m, instr.k), "B": (instr.k, instr.n), "C": (instr.m, instr.n)}[operand]
    return Grid(cells, [str(lane) for lane in range(instr.group_size)], [str(v) for v in range(op.values)],
                f"{operand} ({dims[0]}×{dims[1]}): ({what[0]}, {what[1]})", "lane", "slot", 36, 14, 8)


def operands_svg(instr: Instruction) -> str:
    """A, B and C side by side (an SVG document)."""
    cv = Canvas("operands")
    cv.text(8, 16, f"{instr.name}: {instr.group} of {instr.group_size}, M={instr.m} N={instr.n} K={instr.k}, "
                   f"{'/'.join(instr.in_dtypes)} -> {instr.acc_dtype}", 12, font_weight="bold")
    cv.text(8, 32, "each cell: the (row, column) of the operand's matrix that lane's register slot holds; "
                   "fill: the K index (A, B) or the row (C)", 10)
    x = 8.0
    for name, op in (("A", instr.a), ("B", instr.b), ("C", instr.c)):
        w, _ = draw_grid(cv, x, 44, operand_grid(instr, name, op), f"operand operand-{name}")
        x += w + 24
    cv.text(8, cv.height + 16, f"source: {instr.source}", 9)
    return cv.to_string()
