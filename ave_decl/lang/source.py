"""Source files and spans: every diagnostic points back to `file:line:col` through these."""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .errors import FrontEndError

# A kernel file larger than this is refused before it is parsed (docs/language.md, "Limits"): the
# largest example is 3 KB, and the front end alone takes about 100 µs per token, so a 10 MB file
# would spend minutes in the parser before any analysis starts.
MAX_SOURCE_BYTES = 256 * 1024

# Quoted source text in a message or snippet is cut to this many characters (docs/language.md).
MAX_QUOTE = 60
SNIPPET_WIDTH = 120


# Shown as one space in a snippet: a tab, and what str.splitlines() would break a line at (a form
# feed, U+2028, ...), so the snippet stays one line with the caret under the right column.
_BLANKS = str.maketrans({c: " " for c in "\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


class NotARegularFile(OSError):
    """The path names a directory, FIFO, device or socket: it is never opened for reading (a
    FIFO would block forever), and is reported like any unreadable file."""


@dataclass(frozen=True, order=True)
class CallSite:
    """One call of a `@device` helper that a statement was inlined through."""

    helper: str
    at: "Span"

    def __str__(self) -> str:
        return f"in helper '{self.helper}' called at {self.at}"


@dataclass(frozen=True, order=True)
class Span:
    """A 1-based line/column range in one source file. A span inside a `@device` helper that was
    inlined carries `via`: the calls it was reached through, innermost first (not part of
    equality, so the same helper line compares equal whatever the call)."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    via: tuple[CallSite, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def call_chain(self) -> str:
        """`" (in helper 'f' called at k.ave:30:5, ...)"` for an inlined span, else `""`."""
        return f" ({', '.join(str(c) for c in self.via)})" if self.via else ""

    @staticmethod
    def unknown(path: str = "<unknown>") -> "Span":
        return Span(path, 0, 0, 0, 0)


def normalise(text: str) -> str:
    """The text Python's tokenizer sees: no UTF-8 byte-order mark, and every line ending
    (`\\r\\n`, old-Mac `\\r`, `\\n`) as `\\n`, so line numbers agree for every line-ending style
    and columns are unchanged (only line terminators are rewritten)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """`text` for a one-line message: at most `limit` characters, the cut marked with `…`."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + f"… ({len(text)} characters)"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (else FrontEndError at 1:1).

    Opened non-blocking and checked with fstat on the open descriptor, so a FIFO (or a path
    swapped for one) never blocks and a directory or device is refused before any read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _kind(info.st_mode)
            raise NotARegularFile(errno.EISDIR if stat.S_ISDIR(info.st_mode) else errno.EINVAL,
                                  f"{kind}, not a regular file" if kind.startswith("a ") else kind, str(path))
        if info.st_size > limit:
            raise _too_large(path, info.st_size, limit)
        chunks, total = [], 0
        while True:  # a file that grows while being read is still bounded
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(path, total, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_large(path: str | Path, size: int, limit: int) -> FrontEndError:
    return FrontEndError(f"file is {size} bytes; a kernel file may have at most {limit} bytes ({limit // 1024} KiB)",
                         Span(str(path), 1, 1, 1, 2))


@dataclass(frozen=True)
class SourceFile:
    """The text of a kernel file, kept so diagnostics can quote it. The text is stored
    normalised (see `normalise`): spans, snippets and suppression comments all read the
    same lines the parser saw."""

    path: str
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", normalise(self.text))

    @staticmethod
    def read(path: str | Path) -> "SourceFile":
        return SourceFile.decode(path, read_regular(path, MAX_SOURCE_BYTES))

    @staticmethod
    def decode(path: str | Path, raw: bytes) -> "SourceFile":
        """The file from bytes read elsewhere (an audit's client ships kernel text to Dask
        workers): the same UTF-8 check, and the same size limit, as reading it here."""
        if len(raw) > MAX_SOURCE_BYTES:
            raise _too_large(path, len(raw), MAX_SOURCE_BYTES)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
            raise FrontEndError(
                "file is not valid UTF-8", Span(str(path), line, col, line, col + 1)
            ) from None
        return SourceFile(str(path), text)

    def line_text(self, line: int) -> str:
        """Line `line` (1-based); only `\\n` ends a line, as in the parser (a form feed or
        U+2028 inside a line does not split it)."""
        lines = self.text.split("\n")
        if 1 <= line <= len(lines):
            return lines[line - 1]
        return ""

    def snippet(self, span: Span, label: str = "") -> str:
        """rustc-style excerpt: the line with a caret under the span (a long line is shown as a
        window around the span, so a 100 KB literal is never echoed whole)."""
        if span.line <= 0:
            return ""
        text = self.line_text(span.line).translate(_BLANKS)
        gutter = " " * len(str(span.line))
        col = max(1, span.col)
        if span.end_line == span.line and span.end_col > col:
            width = span.end_col - col
        else:
            width = max(1, len(text.rstrip()) - col + 1)
        if len(text) > SNIPPET_WIDTH:
            start = max(0, min(col - 1 - SNIPPET_WIDTH // 3, len(text) - SNIPPET_WIDTH))
            end = start + SNIPPET_WIDTH
            shown = ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
            col = col - start + (1 if start else 0)
            width = min(width, end - (span.col - 1))
            text = shown
        caret = " " * (col - 1) + "^" * max(1, width)
        out = [f"{gutter} |", f"{span.line} | {text}", f"{gutter} | {caret}" + (f" {label}" if label else "")]
        return "\n".join(out)
