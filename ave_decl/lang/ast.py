"""Plain AST dataclasses for the Ave tile DSL.

Spans never take part in equality, so `parse(print(ast)) == ast` holds for the round trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .source import Span

_NOSPAN = Span.unknown()


def _span() -> Span:
    return field(default=_NOSPAN, compare=False, repr=False)


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Name:
    id: str
    span: Span = _span()


@dataclass(frozen=True)
class Int:
    value: int
    span: Span = _span()


@dataclass(frozen=True)
class Float:
    value: float
    span: Span = _span()


@dataclass(frozen=True)
class Str:
    value: str
    span: Span = _span()


@dataclass(frozen=True)
class Bool:
    value: bool
    span: Span = _span()


@dataclass(frozen=True)
class BinOp:
    """Binary operator: + - * / // % @ ** << >> & | ^ and comparisons."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class UnaryOp:
    op: str  # '-', '+', '~', 'not'
    operand: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class BoolOp:
    op: str  # 'and' | 'or'
    values: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class IfExp:
    cond: "Expr"
    then: "Expr"
    orelse: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Keyword:
    name: str
    value: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    func: "Expr"
    args: tuple["Expr", ...]
    kwargs: tuple[Keyword, ...] = ()
    span: Span = _span()

    @property
    def func_name(self) -> str | None:
        return self.func.id if isinstance(self.func, Name) else None

    def kwarg(self, name: str) -> "Expr | None":
        for kw in self.kwargs:
            if kw.name == name:
                return kw.value
        return None


@dataclass(frozen=True)
class Subscript:
    value: "Expr"
    indices: tuple["Expr", ...]
    span: Span = _span()
    # > 1: this element reference is one of the `lanes` elements of a vector access
    # (lang/packed.py), which the coalescing check judges as one access; not part of equality
    lanes: int = field(default=1, compare=False, repr=False)


@dataclass(frozen=True)
class Attribute:
    value: "Expr"
    attr: str
    span: Span = _span()


@dataclass(frozen=True)
class Tuple:
    elts: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class Lambda:
    params: tuple[str, ...]
    body: "Expr"
    span: Span = _span()


Expr = Union[Name, Int, Float, Str, Bool, BinOp, UnaryOp, BoolOp, IfExp, Call, Subscript, Attribute, Tuple, Lambda]


# ----------------------------------------------------------------- statements
@dataclass(frozen=True)
class Assign:
    target: Expr  # Name or Subscript
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class AugAssign:
    target: Expr
    op: str  # '+', '-', '*', '//', '%'
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class ExprStmt:
    expr: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Pass:
    span: Span = _span()


@dataclass(frozen=True)
class For:
    var: str
    iter: Expr
    body: tuple["Stmt", ...]
    span: Span = _span()


@dataclass(frozen=True)
class If:
    cond: Expr
    body: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()
    span: Span = _span()


@dataclass(frozen=True)
class Return:
    """`return e` (or a bare `return`): only as the last statement of a `@device` helper."""

    value: Expr | None = None
    span: Span = _span()


Stmt = Union[Assign, AugAssign, ExprStmt, Pass, For, If, Return]


# ------------------------------------------------------------------ top level
@dataclass(frozen=True)
class Param:
    name: str
    annotation: Expr | None  # None only for a helper's parameter
    span: Span = _span()


@dataclass(frozen=True)
class Kernel:
    name: str
    decorator: Call
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Helper:
    """`@device def name(a, b):` - inlined at every call before anything else sees the kernel
    (lang/inline.py); kept in the module so that the printer writes it back."""

    name: str
    decorator: Call
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Import:
    module: str
    names: tuple[str, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Module:
    imports: tuple[Import, ...]
    kernels: tuple[Kernel, ...]
    path: str = field(default="<string>", compare=False)
    helpers: tuple[Helper, ...] = ()
