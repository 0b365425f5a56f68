"""Source files and spans: every diagnostic points back to `file:line:col` through these."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import FrontEndError


@dataclass(frozen=True, order=True)
class Span:
    """A 1-based line/column range in one source file."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    @staticmethod
    def unknown(path: str = "<unknown>") -> "Span":
        return Span(path, 0, 0, 0, 0)


@dataclass(frozen=True)
class SourceFile:
    """The text of a kernel file, kept so diagnostics can quote it."""

    path: str
    text: str

    @staticmethod
    def read(path: str | Path) -> "SourceFile":
        raw = Path(path).read_bytes()
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
        lines = self.text.splitlines()
        if 1 <= line <= len(lines):
            return lines[line - 1]
        return ""

    def snippet(self, span: Span, label: str = "") -> str:
        """rustc-style excerpt: the line with a caret under the span."""
        if span.line <= 0:
            return ""
        text = self.line_text(span.line).replace("\t", " ")
        gutter = " " * len(str(span.line))
        if span.end_line == span.line and span.end_col > span.col:
            width = span.end_col - span.col
        else:
            width = max(1, len(text.rstrip()) - span.col + 1)
        caret = " " * (span.col - 1) + "^" * max(1, width)
        out = [f"{gutter} |", f"{span.line} | {text}", f"{gutter} | {caret}" + (f" {label}" if label else "")]
        return "\n".join(out)
