"""The reference language of `@kernel(..., reference="OUT = expression")`: parser and type checker.

A kernel's reference is untrusted text, so it is parsed by our own grammar (grammar/reference.lark)
into a small typed AST, never handed to Python: names are the kernel's tensor and size parameters
only, calls name one of `FUNCTIONS` only, and there is no attribute access. The simulator
(`sim/reference.py`) evaluates the AST over numpy. Errors are FrontEndErrors whose span points
into the string where the kernel file allows it (`file:line:col`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Union

from lark import Lark, Token, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from . import ast as A
from .errors import FrontEndError
from .lark_spans import SpanTransformer
from .build_cache import build_scanners, lark_parser
from .resources import grammar_path
from .source import Span

MAX_CHARS = 1000  # a reference is one formula; longer text is refused before parsing
MAX_DEPTH = 64  # nesting of the parse tree; the evaluator recurses over the AST
MAX_INT = 2 ** 63  # integer literals are below this

TENSOR, NUMBER, BOOL, AXES = "tensor", "number", "bool", "axes"  # the types of reference nodes


# ------------------------------------------------------------------- the typed AST
@dataclass(frozen=True)
class Num:
    value: int | float
    span: Span
    type: str = NUMBER


@dataclass(frozen=True)
class Const:
    """A literal argument that is not data: True/False, an axis or a tuple of axes (None: all)."""

    value: bool | int | tuple[int, ...] | None
    span: Span
    type: str = AXES


@dataclass(frozen=True)
class Name:
    id: str
    span: Span
    type: str = TENSOR  # TENSOR (a tensor parameter) or NUMBER (a size)


@dataclass(frozen=True)
class Unary:
    op: str  # '-' | '+'
    operand: "Node"
    span: Span
    type: str = TENSOR


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / // % ** @ and the comparisons == != < <= > >=
    left: "Node"
    right: "Node"
    span: Span
    type: str = TENSOR


@dataclass(frozen=True)
class Slice:
    lo: "Node | None"
    hi: "Node | None"
    step: "Node | None"
    span: Span
    type: str = "slice"


@dataclass(frozen=True)
class Index:
    """`x[i, j:k, ids]`: integers, slices and index tensors (a gather), numpy's semantics."""

    base: "Node"
    items: tuple["Node | Slice", ...]
    span: Span
    type: str = TENSOR


@dataclass(frozen=True)
class Call:
    """A call of one of FUNCTIONS; `args` follow the function's parameters, defaults filled in."""

    func: str
    args: tuple["Node", ...]
    span: Span
    type: str = TENSOR


Node = Union[Num, Const, Name, Unary, Binary, Index, Call]


DEFAULT_TOLERANCE = 1e-3
MAX_TOLERANCE = 0.1


@dataclass(frozen=True)
class Reference:
    """`OUT = expression`: the output tensor and the expression it must equal."""

    output: str
    expr: Node
    text: str  # the expression's text, for reports
    span: Span
    tolerance: float = DEFAULT_TOLERANCE  # @kernel(tolerance=): the largest error relative to max |expected|


# ---------------------------------------------------------------- the functions
@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "value": tensor or number; "tensor"; "int": a number; "axis": literal axes; "bool": literal
    default: object = ...


_X, _Y = Param("x", "value"), Param("y", "value")
_REDUCE = (Param("x", "tensor"), Param("axis", "axis", None), Param("keepdims", "bool", False))

FUNCTIONS: dict[str, tuple[Param, ...]] = {
    **{f: (_X,) for f in ("exp", "exp2", "log", "log2", "sqrt", "abs", "tanh")},
    "maximum": (_X, _Y), "minimum": (_X, _Y),
    "where": (Param("condition", "value"), _X, _Y),
    "sum": _REDUCE, "max": _REDUCE, "min": _REDUCE, "mean": _REDUCE,
    "softmax": (Param("x", "tensor"), Param("axis", "axis", -1)),
    "transpose": (Param("x", "tensor"), Param("axes", "axis", None)),
    "attention": (Param("q", "tensor"), Param("k", "tensor"), Param("v", "tensor"), Param("causal", "bool", True)),
    "moe": (Param("x", "tensor"), Param("w", "tensor"), Param("sorted_ids", "tensor"), Param("expert_ids", "tensor"),
            Param("weights", "tensor"), Param("topk", "int"), Param("block", "int", 32)),
}


# ------------------------------------------------------------------- parameters
def kernel_names(kernel: A.Kernel) -> dict[str, str]:
    """The names a reference may use: tensor parameters (TENSOR) and sizes (NUMBER)."""
    out: dict[str, str] = {}
    for p in kernel.params:
        ann = p.annotation
        if isinstance(ann, A.Subscript) and len(ann.indices) >= 2:
            out[p.name] = TENSOR
            dims = ann.indices[1]
            for d in dims.elts if isinstance(dims, A.Tuple) else (dims,):
                if isinstance(d, A.Name):
                    out.setdefault(d.id, NUMBER)
        else:
            out[p.name] = NUMBER
    return out


# ---------------------------------------------------------------------- parsing
@lru_cache(maxsize=1)
def _lark() -> Lark:
    return lark_parser(grammar_path("reference.lark"), propagate_positions=True, maybe_placeholders=False)


def warm_up() -> None:
    """The parser with every lexer scanner built (pipeline.warm_up: before an audit forks)."""
    build_scanners(_lark())


class _Where:
    """Maps positions in the reference text to the kernel file: exact when the string literal has
    no escapes (its text is the source text), else the whole literal."""

    def __init__(self, literal: Span, text: str):
        self.literal = literal
        self.exact = literal.line > 0 and literal.line == literal.end_line and \
            literal.end_col - literal.col == len(text) + 2

    def at(self, col: int, end_col: int | None = None) -> Span:
        s = self.literal
        if not self.exact:
            return s
        start = s.col + max(col, 1)
        return Span(s.path, s.line, start, s.line, s.col + max(end_col or col + 1, col + 1))


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + "…"


class _Build(SpanTransformer):
    """Parse tree -> typed AST; every check that needs no sizes happens here."""

    def __init__(self, where: _Where, names: dict[str, str]):
        super().__init__(where.literal.path)
        self.where = where
        self.names = names

    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return self.where.literal
        return self.where.at(meta.column, meta.end_column)

    def _tok(self, tok: Token) -> Span:
        return self.where.at(tok.column, tok.end_column)

    def _err(self, msg: str, span: Span) -> FrontEndError:
        return FrontEndError(f"reference: {msg}", span)

    def _data(self, node, what: str):
        """A tensor or number operand (not True/False, an axis tuple or a slice)."""
        if isinstance(node, (Const, Slice)) or node.type not in (TENSOR, NUMBER):
            raise self._err(f"{what} takes a tensor or a number", node.span)
        return node

    @staticmethod
    def _result(*nodes) -> str:
        return TENSOR if any(n.type == TENSOR for n in nodes) else NUMBER

    # -- top level
    def start(self, items):
        out, expr = items
        if self.names.get(str(out)) != TENSOR:
            raise self._err(f"'{_short(str(out))}' is not a tensor parameter of the kernel; write OUT = expression "
                            f"with OUT one of its tensors", self._tok(out))
        self._data(expr, "the reference")
        return out, expr

    # -- expressions
    @v_args(meta=True)
    def compare(self, meta, items):
        left, op, right = items
        return Binary(str(op), self._data(left, str(op)), self._data(right, str(op)), self._span(meta),
                      self._result(left, right))

    @v_args(meta=True)
    def arith(self, meta, items):
        left = items[0]
        for i in range(1, len(items), 2):
            op, right = str(items[i]), items[i + 1]
            span = Span(self.path, left.span.line, left.span.col, right.span.end_line, right.span.end_col)
            if op == "@":
                for x in (left, right):
                    if self._data(x, "@").type != TENSOR:
                        raise self._err("@ multiplies two tensors", x.span)
            left = Binary(op, self._data(left, op), self._data(right, op), span, self._result(left, right))
        return left

    term = arith

    @v_args(meta=True)
    def power(self, meta, items):
        base, _, exponent = items
        return Binary("**", self._data(base, "**"), self._data(exponent, "**"), self._span(meta),
                      self._result(base, exponent))

    @v_args(meta=True)
    def unary(self, meta, items):
        op, operand = items
        operand = self._data(operand, f"unary {op}")
        if isinstance(operand, Num):
            return Num(-operand.value if str(op) == "-" else operand.value, self._span(meta))
        return Unary(str(op), operand, self._span(meta), operand.type)

    @v_args(meta=True)
    def index(self, meta, items):
        base, subs = items
        if isinstance(base, (Const, Slice)) or base.type != TENSOR:
            raise self._err("only a tensor can be indexed", base.span)
        for s in subs:
            if not isinstance(s, Slice):
                self._data(s, "an index")
        return Index(base, tuple(subs), self._span(meta))

    def subscripts(self, items):
        return list(items)

    @v_args(meta=True)
    def slice(self, meta, items):
        parts: list = [None]
        for it in items:
            if isinstance(it, Token) and it.type == "COLON":
                parts.append(None)
            else:
                parts[-1] = self._data(it, "a slice bound")
                if it.type != NUMBER:
                    raise self._err("a slice bound is a number", it.span)
        lo, hi, step = (parts + [None, None])[:3]
        return Slice(lo, hi, step, self._span(meta))

    @v_args(meta=True)
    def call(self, meta, items):
        name, *rest = items
        func = str(name)
        span = self._span(meta)
        if func not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise self._err(f"unknown function '{_short(func)}' (the reference language has {known})",
                            self._tok(name))
        pos, kws = rest[0] if rest else ([], [])
        params = FUNCTIONS[func]
        if len(pos) > len(params):
            raise self._err(f"{func}() takes at most {len(params)} arguments, got {len(pos)}", span)
        bound: dict[str, object] = {p.name: a for p, a in zip(params, pos)}
        for kw_name, value, kw_span in kws:
            if kw_name not in {p.name for p in params}:
                raise self._err(f"{func}() has no argument '{_short(kw_name)}' (it takes "
                                f"{', '.join(p.name for p in params)})", kw_span)
            if kw_name in bound:
                raise self._err(f"{func}() got '{kw_name}' twice", kw_span)
            bound[kw_name] = value
        args = []
        for p in params:
            if p.name not in bound:
                if p.default is ...:
                    raise self._err(f"{func}() needs its argument '{p.name}'", span)
                args.append(Num(p.default, span) if p.kind == "int" else  # type: ignore[arg-type]
                            Const(p.default, span, BOOL if p.kind == "bool" else AXES))  # type: ignore[arg-type]
                continue
            args.append(self._argument(func, p, bound[p.name]))
        elementwise = all(p.kind == "value" for p in params)
        return Call(func, tuple(args), span, self._result(*args) if elementwise else TENSOR)

    def _argument(self, func: str, p: Param, a):
        where = f"{func}() argument '{p.name}'"
        if p.kind == "bool":
            if not (isinstance(a, Const) and isinstance(a.value, bool)):
                raise self._err(f"{where} is True or False", a.span)
            return a
        if p.kind == "axis":
            if isinstance(a, Num) and type(a.value) is int:
                return Const(a.value, a.span)
            if not (isinstance(a, Const) and a.type == AXES):
                if func == "max" or func == "min":
                    raise self._err(f"{where} is an integer axis or a tuple of them (for the elementwise "
                                    f"{func}imum of two values use {func}imum(x, y))", a.span)
                raise self._err(f"{where} is an integer axis or a tuple of them", a.span)
            return a
        self._data(a, where)
        if p.kind == "tensor" and a.type != TENSOR:
            raise self._err(f"{where} is a tensor", a.span)
        if p.kind == "int" and a.type != NUMBER:
            raise self._err(f"{where} is a number (an integer)", a.span)
        return a

    def arguments(self, items):
        pos, kws = [], []
        for it in items:
            if isinstance(it, tuple):
                kws.append(it)
            elif kws:
                raise self._err("positional argument follows keyword argument", it.span)
            else:
                pos.append(it)
        return pos, kws

    @v_args(meta=True)
    def kwarg(self, meta, items):
        name, value = items
        return str(name), value, self._span(meta)

    @v_args(meta=True)
    def tuple_lit(self, meta, items):
        axes = []
        for it in items:
            if not (isinstance(it, Num) and type(it.value) is int):
                raise self._err("a tuple is a tuple of integer axes, e.g. (1, 0)", it.span)
            axes.append(it.value)
        return Const(tuple(axes), self._span(meta))

    @v_args(meta=True)
    def name(self, meta, items):
        (tok,) = items
        kind = self.names.get(str(tok))
        if kind is None:
            raise self._err(f"unknown name '{_short(str(tok))}' (a reference may use the kernel's tensor and "
                            f"size parameters and the listed functions)", self._span(meta))
        return Name(str(tok), self._span(meta), kind)

    @v_args(meta=True)
    def int_lit(self, meta, items):
        text = str(items[0]).replace("_", "")
        if len(text) > 19 or int(text) >= MAX_INT:
            raise self._err(f"integer literal {_short(text)} is too large", self._span(meta))
        return Num(int(text), self._span(meta))

    @v_args(meta=True)
    def float_lit(self, meta, items):
        return Num(float(str(items[0]).replace("_", "")), self._span(meta))

    @v_args(meta=True)
    def true_lit(self, meta, items):
        return Const(True, self._span(meta), BOOL)

    @v_args(meta=True)
    def false_lit(self, meta, items):
        return Const(False, self._span(meta), BOOL)


def _depth(tree: Tree) -> int:
    """The nesting depth of a parse tree, without recursion (the build below recurses)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        t, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in t.children if isinstance(c, Tree))
    return deepest


def _syntax_error(exc: UnexpectedInput, text: str, where: _Where) -> FrontEndError:
    col = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else "?"
        if ch == ".":
            msg = "attribute access ('.') is not part of the reference language"
        elif ch in "'\"":
            msg = "strings are not part of the reference language"
        else:
            msg = f"unexpected character {ch!r}"
    elif isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        tok = str(exc.token)
        if tok == "(":
            msg = "only a listed function can be called, by its name: f(...)"
        else:
            msg = f"invalid syntax: unexpected {_short(tok)!r}"
    else:
        col = len(text) + 1
        msg = "unexpected end of the reference"
    return FrontEndError(f"reference: {msg}", where.at(max(col, 1)))


def parse_reference(text: str, literal: Span, names: dict[str, str]) -> Reference:
    """Parse `OUT = expression` (the value of a string literal at `literal`) against the kernel's
    names. Raises FrontEndError on any problem; nothing of the text is ever executed."""
    where = _Where(literal, text)
    if len(text) > MAX_CHARS:
        raise FrontEndError(f"reference is too long ({len(text)} characters; at most {MAX_CHARS})", literal)
    if "=" not in text:
        raise FrontEndError('reference= takes a string "OUT = expression"', literal)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, where) from None
    if _depth(tree) > MAX_DEPTH:
        raise FrontEndError(f"reference is nested too deeply (more than {MAX_DEPTH} levels)", literal)
    try:
        out, expr = _Build(where, names).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, FrontEndError):
            raise exc.orig_exc from None
        raise
    if expr.type != TENSOR:
        raise FrontEndError("reference: the expression must compute a tensor", expr.span)
    _, _, rhs = text.partition("=")
    return Reference(str(out), expr, rhs.strip(), literal)


def reference_of(kernel: A.Kernel) -> Reference | None:
    """The kernel's declared reference, parsed and checked (None when it declares none)."""
    ref = kernel.decorator.kwarg("reference")
    if ref is None:
        return None
    if not isinstance(ref, A.Str):
        raise FrontEndError('reference= takes a string "OUT = expression"', ref.span)
    parsed = parse_reference(ref.value, ref.span, kernel_names(kernel))
    tol = kernel.decorator.kwarg("tolerance")
    return parsed if tol is None else replace(parsed, tolerance=tolerance_value(tol))


def tolerance_value(e: A.Expr) -> float:
    """`tolerance=` of @kernel: a number literal in (0, 0.1] (a kernel that rounds what it
    computes to bf16 on the way, as flash attention's P, differs from the exact reference by more
    than the default 1e-3)."""
    v = e.value if isinstance(e, (A.Int, A.Float)) and not isinstance(e.value, bool) else None
    if v is None or not 0 < v <= MAX_TOLERANCE:
        raise FrontEndError(f"tolerance= takes a number above 0 and at most {MAX_TOLERANCE} (the largest error "
                            f"relative to the reference's largest magnitude; more would hide wrong outputs)", e.span)
    return float(v)


def check_references(module: A.Module) -> None:
    """The front end's check of every kernel's reference (raises the first FrontEndError)."""
    for k in module.kernels:
        reference_of(k)
