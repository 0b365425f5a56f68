"""A Lark transformer base that turns Lark positions into our Spans (shared by both grammars)."""
from __future__ import annotations

from lark import Token, Transformer

from .source import Span


class SpanTransformer(Transformer):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span.unknown(self.path)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)
