"""Lark front end: `.ave` text -> AST dataclasses, with file:line:col errors."""
from __future__ import annotations

import ast as pyast
import warnings
from functools import lru_cache

from lark import Lark, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.indenter import PythonIndenter

from . import ast as A
from .brackets import unclosed_bracket
from .buffer_ops import desugar_buffer_ops
from .depth import check_nesting
from .early_return import desugar_returns
from .errors import FrontEndError
from .inline import HELPER_DECORATOR, inline_helpers
from .lark_spans import SpanTransformer
from .masked import desugar_masked
from .packed import desugar_packed
from .build_cache import build_scanners, lark_parser
from .resources import grammar_path
from .source import MAX_SOURCE_BYTES, SourceFile, Span, quote

# No integer constant of the language needs more digits than this (constants are 32-bit,
# docs/language.md "Limits"); a longer literal is refused before int() converts it.
_MAX_LITERAL_DIGITS = 64

_TOKEN_WORDS = {
    "_NEWLINE": "end of line", "_INDENT": "indent", "_DEDENT": "dedent", "$END": "end of file",
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COLON": "':'", "COMMA": "','",
    "EQUAL": "'='", "SEMICOLON": "';'", "AT": "'@'", "DOT": "'.'",
}


def indent_width(leading: str) -> int:
    """The indentation column of a line's leading whitespace, as CPython's tokenizer counts it:
    a tab moves to the next multiple of 8, a form feed resets the column to 0."""
    col = 0
    for ch in leading:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col = (col // 8 + 1) * 8
        elif ch == "\f":
            col = 0
    return col


class _Indenter(PythonIndenter):
    """Lark's Python indenter with CPython's column rule (`indent_width`): a form feed in the
    leading whitespace is accepted as Python accepts it."""

    def handle_NL(self, token):
        if self.paren_level > 0:
            return
        yield token
        indent_str = token.rsplit("\n", 1)[1]
        indent = indent_width(indent_str)
        if indent > self.indent_level[-1]:
            self.indent_level.append(indent)
            yield type(token).new_borrow_pos(self.INDENT_type, indent_str, token)
        else:
            while indent < self.indent_level[-1]:
                self.indent_level.pop()
                yield type(token).new_borrow_pos(self.DEDENT_type, indent_str, token)
            if indent != self.indent_level[-1]:
                raise _DedentError(f"unexpected dedent to column {indent}; expected column {self.indent_level[-1]}",
                                   token.end_line)


class _DedentError(Exception):
    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return lark_parser(grammar_path("ave.lark"), postlex=_Indenter(), propagate_positions=True,
                       maybe_placeholders=False)


def warm_up() -> None:
    """The parser with every lexer scanner built (pipeline.warm_up: before an audit forks)."""
    build_scanners(_lark())


class _Build(SpanTransformer, Transformer_NonRecursive):
    """Tree -> AST. Every node gets a Span from Lark's meta. Non-recursive, so no nesting of the
    input can exhaust Python's stack here (the AST's depth is bounded right after, lang/depth.py)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.returns: list[A.Return] = []  # `return` statements of the def being built
        self.kernel_returns = False  # some kernel has an early `return` (lang/early_return.py)

    # -- top level
    @v_args(meta=True)
    def start(self, meta, items):
        imports = tuple(i for i in items if isinstance(i, A.Import))
        kernels = tuple(i for i in items if isinstance(i, A.Kernel))
        helpers = tuple(i for i in items if isinstance(i, A.Helper))
        return A.Module(imports, kernels, self.path, helpers)

    @v_args(meta=True)
    def import_stmt(self, meta, items):
        module, *names = items
        return A.Import(module, tuple(str(n) for n in names), self._span(meta))

    def dotted_name(self, items):
        return ".".join(str(t) for t in items)

    @v_args(meta=True)
    def kernel_def(self, meta, items):
        decorator, name, *rest = items
        returns, self.returns = self.returns, []
        params = tuple(rest[0] if len(rest) == 2 else ())
        body = tuple(rest[-1])
        if decorator.func_name == HELPER_DECORATOR:
            if decorator.args or decorator.kwargs:
                raise FrontEndError(f"@{HELPER_DECORATOR} takes no arguments", decorator.span)
            for p in params:
                if p.annotation is not None:
                    raise FrontEndError(f"helper parameter '{p.name}' takes no type: it stands for whatever "
                                        f"the call passes", p.annotation.span)
            return A.Helper(str(name), decorator, params, body, self._span(meta))
        for r in returns:
            if r.value is not None:
                raise FrontEndError("a kernel returns no value: a bare `return` ends the thread", r.span)
        self.kernel_returns = self.kernel_returns or bool(returns)
        for p in params:
            if p.annotation is None:
                raise FrontEndError(f"kernel parameter '{p.name}' needs a type, e.g. {p.name}: Tensor[bf16, (M, K)] "
                                    f"or {p.name}: int", p.span)
        return A.Kernel(str(name), decorator, params, body, self._span(meta))

    @v_args(meta=True)
    def decorator(self, meta, items):
        name, *args = items
        pos, kws = args[0] if args else ((), ())
        return A.Call(A.Name(str(name), self._tok(name)), pos, kws, self._span(meta))

    def params(self, items):
        return tuple(items)

    @v_args(meta=True)
    def param(self, meta, items):
        return A.Param(str(items[0]), items[1] if len(items) > 1 else None, self._span(meta))

    # -- statements
    def simple_stmt(self, items):
        return list(items)

    @v_args(meta=True)
    def assign(self, meta, items):
        return A.Assign(items[0], items[1], self._span(meta))

    @v_args(meta=True)
    def aug_assign(self, meta, items):
        target, op, value = items
        return A.AugAssign(target, str(op)[:-1], value, self._span(meta))

    @v_args(meta=True)
    def expr_stmt(self, meta, items):
        return A.ExprStmt(items[0], self._span(meta))

    @v_args(meta=True)
    def pass_stmt(self, meta, items):
        return A.Pass(self._span(meta))

    @v_args(meta=True)
    def return_stmt(self, meta, items):
        node = A.Return(items[0] if items else None, self._span(meta))
        self.returns.append(node)  # the enclosing def is built after its body
        return node

    def suite(self, items):
        out: list = []
        for item in items:
            if isinstance(item, list):
                out.extend(item)
            elif item is not None:
                out.append(item)
        return out

    @v_args(meta=True)
    def for_stmt(self, meta, items):
        var, it, body = items
        return A.For(str(var), it, tuple(body), self._span(meta))

    @v_args(meta=True)
    def if_stmt(self, meta, items):
        cond, body, *clauses = items
        orelse: tuple = ()
        for clause in reversed(clauses):
            if clause[0] == "else":
                orelse = tuple(clause[1])
            else:
                _, c, b, sp = clause
                orelse = (A.If(c, tuple(b), orelse, sp),)
        return A.If(cond, tuple(body), orelse, self._span(meta))

    @v_args(meta=True)
    def elif_clause(self, meta, items):
        return ("elif", items[0], items[1], self._span(meta))

    def else_clause(self, items):
        return ("else", items[0])

    # -- expressions
    def _fold(self, meta, items):
        left = items[0]
        for i in range(1, len(items), 2):
            op, right = items[i], items[i + 1]
            left = A.BinOp(str(op), left, right, self._join(left, right))
        return left

    def _join(self, a, b) -> Span:
        sa, sb = a.span, b.span
        return Span(self.path, sa.line, sa.col, sb.end_line, sb.end_col)

    @v_args(meta=True)
    def comparison(self, meta, items):
        if len(items) == 3:
            return A.BinOp(str(items[1]), items[0], items[2], self._span(meta))
        parts = []
        for i in range(0, len(items) - 2, 2):
            parts.append(A.BinOp(str(items[i + 1]), items[i], items[i + 2], self._join(items[i], items[i + 2])))
        return A.BoolOp("and", tuple(parts), self._span(meta))

    def _literal_fold(op):
        @v_args(meta=True)
        def fold(self, meta, items):
            left = items[0]
            for right in items[1:]:
                left = A.BinOp(op, left, right, self._join(left, right))
            return left
        return fold

    bit_or = _literal_fold("|")
    bit_xor = _literal_fold("^")
    bit_and = _literal_fold("&")

    @v_args(meta=True)
    def power(self, meta, items):
        return A.BinOp("**", items[0], items[2], self._span(meta))

    @v_args(meta=True)
    def shift_expr(self, meta, items):
        return self._fold(meta, items)

    arith_expr = shift_expr
    term = shift_expr

    @v_args(meta=True)
    def or_test(self, meta, items):
        return A.BoolOp("or", tuple(items), self._span(meta))

    @v_args(meta=True)
    def and_test(self, meta, items):
        return A.BoolOp("and", tuple(items), self._span(meta))

    @v_args(meta=True)
    def not_test(self, meta, items):
        return A.UnaryOp("not", items[0], self._span(meta))

    @v_args(meta=True)
    def unary(self, meta, items):
        op, operand = items
        return A.UnaryOp(str(op), operand, self._span(meta))

    @v_args(meta=True)
    def if_exp(self, meta, items):
        then, cond, orelse = items
        return A.IfExp(cond, then, orelse, self._span(meta))

    @v_args(meta=True)
    def lambdef(self, meta, items):
        if len(items) == 1:
            return A.Lambda((), items[0], self._span(meta))
        return A.Lambda(tuple(items[0]), items[1], self._span(meta))

    def lambda_params(self, items):
        return [str(t) for t in items]

    @v_args(meta=True)
    def call(self, meta, items):
        func, *rest = items
        pos, kws = rest[0] if rest else ((), ())
        return A.Call(func, pos, kws, self._span(meta))

    def arguments(self, items):
        pos, kws = [], []
        for item in items:
            if isinstance(item, A.Keyword):
                kws.append(item)
            else:
                if kws:
                    raise FrontEndError("positional argument follows keyword argument", item.span)
                pos.append(item)
        return tuple(pos), tuple(kws)

    @v_args(meta=True)
    def kwarg(self, meta, items):
        return A.Keyword(str(items[0]), items[1], self._span(meta))

    @v_args(meta=True)
    def subscript(self, meta, items):
        return A.Subscript(items[0], tuple(items[1]), self._span(meta))

    def subscripts(self, items):
        return list(items)

    @v_args(meta=True)
    def attribute(self, meta, items):
        return A.Attribute(items[0], str(items[1]), self._span(meta))

    @v_args(meta=True)
    def name(self, meta, items):
        return A.Name(str(items[0]), self._span(meta))

    @v_args(meta=True)
    def int_lit(self, meta, items):
        text = str(items[0])
        digits = text.replace("_", "")
        if digits[:2].lower() in ("0x", "0b"):
            digits = digits[2:]
        if len(digits.lstrip("0")) > _MAX_LITERAL_DIGITS:
            raise FrontEndError(f"integer literal {quote(text, 24)} is too large (integer constants are 32-bit)",
                                self._span(meta))
        try:
            return A.Int(int(text.replace("_", ""), 0), self._span(meta))
        except ValueError:
            raise FrontEndError(f"invalid integer literal '{quote(text)}' (as in Python, no leading zeros)",
                                self._span(meta)) from None

    @v_args(meta=True)
    def float_lit(self, meta, items):
        return A.Float(float(str(items[0]).replace("_", "")), self._span(meta))

    @v_args(meta=True)
    def str_lit(self, meta, items):
        text = str(items[0])
        try:
            with warnings.catch_warnings():  # an unknown escape such as "\d" is a warning in Python
                warnings.simplefilter("ignore")
                value = pyast.literal_eval(text)
        except (SyntaxError, ValueError) as exc:  # "\x", "\N{NO SUCH NAME}"
            raise FrontEndError(f"invalid string literal {quote(text)}: {getattr(exc, 'msg', exc)}",
                                self._span(meta)) from None
        return A.Str(value, self._span(meta))

    @v_args(meta=True)
    def true_lit(self, meta, items):
        return A.Bool(True, self._span(meta))

    @v_args(meta=True)
    def false_lit(self, meta, items):
        return A.Bool(False, self._span(meta))

    @v_args(meta=True)
    def empty_tuple(self, meta, items):
        return A.Tuple((), self._span(meta))

    @v_args(meta=True)
    def tuple_lit(self, meta, items):
        return A.Tuple(tuple(items), self._span(meta))


def _describe_expected(expected: set[str]) -> str:
    words = sorted({_TOKEN_WORDS.get(e, e.lower() if e.isupper() else e) for e in expected})
    if len(words) > 6:
        words = words[:6] + ["…"]
    return ", ".join(words)


def _syntax_error(src: SourceFile, exc: UnexpectedInput) -> FrontEndError:
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    if isinstance(exc, UnexpectedCharacters):
        ch = src.text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(src.text) else "?"
        msg = f"unexpected character {ch!r}"
    elif isinstance(exc, UnexpectedEOF):
        lines = src.text.rstrip("\n").split("\n")
        line, col = len(lines), len(lines[-1]) + 1
        msg = "unexpected end of file"
    elif isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            lines = src.text.rstrip("\n").split("\n")
            line, col = len(lines), len(lines[-1]) + 1
            what = "end of file"
        elif tok.type == "_INDENT":
            what = "indent"
            # the token borrows the line end's position: point at the line it indents instead
            line, col = getattr(tok, "end_line", None) or line, getattr(tok, "end_column", None) or col
        elif tok.type == "_DEDENT":  # (at the end of the file there is no line after it to point at)
            what = "dedent"
        elif tok.type == "_NEWLINE":
            what = "end of line"
        else:
            what = repr(quote(str(tok)))
        msg = f"invalid syntax: unexpected {what}; expected {_describe_expected(set(exc.expected))}"
        opened = unclosed_bracket(src.text)
        if opened is not None and (opened[0], opened[1]) < (line, col):
            line, col, bracket = opened
            msg = f"invalid syntax: {bracket!r} was never closed"
    else:
        msg = "invalid syntax"
    line = max(line, 1)
    col = max(col, 1)
    return FrontEndError(msg, Span(src.path, line, col, line, col + 1))


def parse_source(src: SourceFile) -> A.Module:
    """Parse one file. Raises FrontEndError (exit code 3) on any syntax problem.

    Memoised by (path, text), the last `PARSE_MEMO_SIZE` files: a repair loop hands the same
    candidate to the spec guard, `check`, the simulator and the performance model, and parsing
    was a large part of each. Sharing one AST is safe because the AST is immutable (frozen
    dataclasses holding tuples; the desugaring passes build new nodes). Errors are not memoised."""
    return _parsed(src.path, src.text)


PARSE_MEMO_SIZE = 128  # about 25 MiB at most: ASTs of typical kernels are 0.1-0.25 MiB


@lru_cache(maxsize=PARSE_MEMO_SIZE)
def _parsed(path: str, text: str) -> A.Module:
    return _parse(SourceFile(path, text))  # the text is normalised already: SourceFile keeps it as is


def clear_parse_memo() -> None:
    """Forget every memoised AST (a benchmark that compares a run with and without memos)."""
    _parsed.cache_clear()


def _parse(src: SourceFile) -> A.Module:
    if len(src.text) > MAX_SOURCE_BYTES:  # text given to the API (files are bounded when read)
        raise FrontEndError(f"source is {len(src.text)} characters; a kernel file may have at most "
                            f"{MAX_SOURCE_BYTES} bytes", Span(src.path, 1, 1, 1, 2))
    text = src.text if src.text.endswith("\n") else src.text + "\n"
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(src, exc) from None
    except _DedentError as exc:
        line = exc.line or _guess_line(src, exc)
        raise FrontEndError(f"invalid indentation ({exc})", Span(src.path, line, 1, line, 2)) from None
    except Exception as exc:  # noqa: BLE001 - the indenter raises plain errors on bad dedents
        line = _guess_line(src, exc)
        raise FrontEndError(f"invalid indentation ({exc})", Span(src.path, line, 1, line, 2)) from None
    build = _Build(src.path)
    try:
        module = build.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, FrontEndError):
            raise exc.orig_exc from None
        raise
    check_nesting(module)
    module = inline_helpers(module)
    module = desugar_returns(module) if build.kernel_returns else module
    return desugar_packed(desugar_masked(desugar_buffer_ops(module)))


def _guess_line(src: SourceFile, exc: Exception) -> int:
    # Lark's indenter reports DedentError without a position: find the first inconsistent dedent.
    stack = [0]
    for n, raw in enumerate(src.text.split("\n"), 1):
        if not raw.strip(" \t\f") or raw.lstrip(" \t\f").startswith("#"):
            continue
        indent = indent_width(raw[: len(raw) - len(raw.lstrip(" \t\f"))])
        if indent > stack[-1]:
            stack.append(indent)
            continue
        while indent < stack[-1]:
            stack.pop()
        if indent != stack[-1]:
            return n
    return 1


def parse_text(text: str, path: str = "<string>") -> A.Module:
    return parse_source(SourceFile(path, text))


def parse_expression(text: str, path: str = "<expr>") -> A.Expr:
    """Parse a single expression (used by the instruction library's operand maps)."""
    module = parse_text(f"@kernel()\ndef _e():\n    {text}\n", path)
    stmt = module.kernels[0].body[0]
    assert isinstance(stmt, A.ExprStmt)
    return stmt.expr
