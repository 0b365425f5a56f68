"""The front end's parse memo (lang/parser.py): the same (path, text) gives the same AST object,
which is safe only while every AST node is immutable."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ave_decl.lang import ast as A
from ave_decl.lang.errors import FrontEndError
from ave_decl.lang.parser import clear_parse_memo, parse_text
from ave_decl.lang.source import CallSite

TEXT = (Path(__file__).resolve().parent.parent / "examples" / "flash_attention_gqa.ave").read_text()


def test_a_file_parsed_again_is_the_memoised_ast():
    clear_parse_memo()
    first = parse_text(TEXT, "a.ave")
    assert parse_text(TEXT, "a.ave") is first
    other = parse_text(TEXT, "b.ave")  # another path: its own spans
    assert other is not first and other == first
    assert other.kernels[0].span.path == "b.ave" and first.kernels[0].span.path == "a.ave"
    clear_parse_memo()
    assert parse_text(TEXT, "a.ave") is not first


def test_a_syntax_error_is_raised_every_time():
    for _ in range(2):
        with pytest.raises(FrontEndError, match="invalid syntax"):
            parse_text("@kernel()\ndef k(:\n    pass\n", "bad.ave")


def test_every_ast_node_is_immutable():
    """What makes sharing one AST safe: frozen dataclasses whose fields hold no list, dict or set."""
    nodes = [c for c in vars(A).values() if isinstance(c, type) and dataclasses.is_dataclass(c)] + [CallSite]
    assert len(nodes) > 20
    for cls in nodes:
        assert cls.__dataclass_params__.frozen, cls.__name__
        for f in dataclasses.fields(cls):
            assert not any(w in str(f.type) for w in ("list", "dict", "set")), f"{cls.__name__}.{f.name}: {f.type}"
