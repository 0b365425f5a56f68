"""Writing pictures: SVG as is, PNG through the optional `png` extra (CairoSVG); every file is
written atomically (a reader never sees half a picture or half a report)."""
from __future__ import annotations

import os
from pathlib import Path

from ..lang.errors import UsageError
from ..lang.files import write_atomic

PNG_HINT = "PNG output needs CairoSVG: pip install 'ave-decl[png]'"


def png_bytes(svg: str) -> bytes:
    """The SVG rendered to PNG (UsageError without CairoSVG or its cairo library); an empty `svg`
    only checks that they are there."""
    try:
        import cairosvg
    except (ImportError, OSError):  # OSError: the Python package without the cairo C library
        raise UsageError(PNG_HINT) from None
    return cairosvg.svg2png(bytestring=svg.encode("utf-8")) if svg else b""


def picture_format(output: str | None, fmt: str | None) -> str:
    """The format `-o`/`--format` ask for ("svg" or "png"); UsageError for what cannot be written
    (PNG to stdout, PNG without CairoSVG, an empty or directory-like -o). The commands call it
    before any work, so a bad request never waits for the verifier."""
    fmt = fmt or ("png" if output and output.lower().endswith(".png") else "svg")
    if output is None and fmt == "png":
        raise UsageError("--format png writes a file: give -o FILE.png")
    if output is not None and (not output or output.endswith(("/", os.sep))):
        raise UsageError(f"-o {output!r}: give a file name")
    if fmt == "png":
        png_bytes("")  # only checks that CairoSVG can be imported
    return fmt


def write_picture(svg: str, output: str | None, fmt: str | None) -> bytes | None:
    """`-o FILE` (format from `--format`, else from the suffix: .png is PNG) or, without `-o`, the
    SVG's bytes for stdout (PNG needs a file)."""
    fmt = picture_format(output, fmt)
    data = png_bytes(svg) if fmt == "png" else svg.encode("utf-8")
    if output is None:
        return data
    write_atomic(Path(output), data)
    return None
