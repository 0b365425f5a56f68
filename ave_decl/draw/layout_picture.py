"""`ave draw layout`: a shared buffer's layout as a grid of storage offsets, coloured by bank.

Each cell (one logical element) shows its offset; the fill is its bank (32 banks of 4 bytes, as
the bank-conflict rule counts them), the number is repeated in the tooltip. For a swizzled layout
the row label also shows the XOR the swizzle applies in that row (`^8`), so the phases show.
"""
from __future__ import annotations

import numpy as np

from ..facts.values import Buffer
from ..hw.dtypes import DTYPE_BYTES
from ..hw.layout import Composed, Swizzle
from ..lang.errors import UsageError
from .grid import Cell, Grid, draw_grid
from .svg import Canvas, sequential

BANKS, BANK_BYTES = 32, 4  # as solver/access_queries.py counts them
MAX_CELLS = 16384
WRAP = 32  # a rank-1 buffer is drawn in rows of at most this many elements (a divisor of its size)


def offsets_of(buf: Buffer, max_rows: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(offsets, swizzle XOR or None) over the buffer's logical shape, as 2-D arrays (rows, cols),
    the first `max_rows` rows only when given."""
    if buf.space != "shared" or buf.layout is None:
        raise UsageError(f"--buffer: {buf.name!r} is a {buf.space} {'tensor' if buf.space == 'global' else 'buffer'}; "
                         "only shared buffers have a layout to draw")
    if buf.const_shape is None:
        raise UsageError(f"--buffer: {buf.name!r} has a symbolic shape; only a constant shape can be drawn")
    shape = buf.const_shape
    size = int(np.prod(shape)) if shape else 1
    cols = shape[-1] if len(shape) > 1 else max(d for d in range(1, WRAP + 1) if size % d == 0)
    shown = min(size, (max_rows or size) * cols)
    if shown > MAX_CELLS:
        raise UsageError(f"--buffer: {buf.name!r} has {size} elements; at most {MAX_CELLS} are drawn "
                         f"(--rows {MAX_CELLS // cols} draws the first rows)")
    # only the drawn elements are evaluated (the first rows of a large buffer, not all of it)
    coords = np.unravel_index(np.arange(shown, dtype=np.int64), shape) if shape else ()
    offsets = np.broadcast_to(np.asarray(buf.layout.evaluate(*coords), np.int64), (shown,))
    xor = None
    layout = buf.layout
    if isinstance(layout, Composed) and isinstance(layout.outer, Swizzle):
        xor = offsets ^ np.asarray(layout.inner.evaluate(*coords), np.int64)
    return offsets.reshape(-1, cols), None if xor is None else xor.reshape(-1, cols)


def layout_svg(buf: Buffer, file: str, kernel: str, max_rows: int | None = None) -> str:
    """The picture of one shared buffer's layout (an SVG document)."""
    offsets, xor = offsets_of(buf, max_rows)
    width = DTYPE_BYTES[buf.dtype]
    banks = (offsets * width // BANK_BYTES) % BANKS
    shape = buf.const_shape or ()
    rank1 = len(shape) <= 1
    rows, cols = offsets.shape

    def element(i: int, j: int) -> str:  # the logical index of the cell in row i, column j
        index = np.unravel_index(i * cols + j, shape) if shape else ()
        return f"{buf.name}[{', '.join(str(int(x)) for x in index)}]"

    cells = [[Cell(str(int(offsets[i, j])), sequential(int(banks[i, j]), BANKS),
                   data={"row": i, "col": j, "offset": int(offsets[i, j]), "bank": int(banks[i, j])},
                   tooltip=f"{element(i, j)} -> offset {int(offsets[i, j])}, bank {int(banks[i, j])}")
              for j in range(cols)] for i in range(rows)]
    row_labels = []
    for i in range(rows):
        label = str(i * cols) if rank1 else str(i)
        if xor is not None:
            phases = np.unique(xor[i])
            label += f" ^{int(phases[0])}" if phases.size == 1 else " ^…"
        row_labels.append(label)
    cw = max(24.0, len(str(int(offsets.max()))) * 5.4 + 8)
    title = f"{buf.name}: {buf.dtype} {tuple(buf.const_shape or ())}, layout {buf.layout}"
    cv = Canvas("layout")
    cv.text(8, 16, f"{file} · kernel {kernel}", 11)
    _, h = draw_grid(cv, 8, 24, Grid(cells, row_labels, [str(j) for j in range(cols)], title,
                                     "element" if rank1 else "row", "" if rank1 else "column", cw, 15))
    y = 24 + h + 14
    note = (f"fill = bank ({BANKS} banks of {BANK_BYTES} bytes; {width}-byte elements)"
            + ("; row label ^n: the swizzle XORs the offsets of that row with n" if xor is not None else ""))
    cv.text(8, y, note, 10)
    for b in range(BANKS):  # the bank key
        x = 8 + b * 26
        cv.rect(x, y + 8, 26, 14, sequential(b, BANKS), stroke="#9a9a9a", stroke_width=0.5, class_="bank-key")
        cv.text(x + 13, y + 18, str(b), 8, anchor="middle", fill="#000000" if b > BANKS * 0.6 else "#ffffff")
    return cv.to_string()
