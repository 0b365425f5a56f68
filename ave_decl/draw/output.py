"""Writing pictures: SVG as is, PNG through the optional `png` extra (CairoSVG); every file is
written atomically (a reader never sees half a picture or half a report)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..lang.errors import UsageError

PNG_HINT = "PNG output needs CairoSVG: pip install 'ave-decl[png]'"


def png_bytes(svg: str) -> bytes:
    """The SVG rendered to PNG (UsageError without CairoSVG or its cairo library); an empty `svg`
    only checks that they are there."""
    try:
        import cairosvg
    except (ImportError, OSError):  # OSError: the Python package without the cairo C library
        raise UsageError(PNG_HINT) from None
    return cairosvg.svg2png(bytestring=svg.encode("utf-8")) if svg else b""


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` through a temporary file in the same directory, then rename it into place.

    A link is followed (the file it names is replaced, the link stays); a path that names no regular
    file, such as /dev/stdout or a FIFO, is written in place: renaming over it would replace the
    device or pipe with a file. Every failure is a one-line UsageError (exit 2)."""
    if os.path.exists(path) and not os.path.isfile(path):
        if os.path.isdir(path):
            raise UsageError(f"cannot write {path}: it is a directory")
        try:
            with open(path, "wb") as out:
                out.write(data)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        return
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {path.parent}")
    target = Path(os.path.realpath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make a report others cannot read
        os.replace(tmp, target)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


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
