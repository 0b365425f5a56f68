"""Canonical `.ave` text from the AST (parse(print(ast)) == ast)."""
from __future__ import annotations

from . import ast as A

# Python precedence, higher binds tighter.
_PREC = {
    "lambda": 1, "if": 2, "or": 3, "and": 4, "not": 5,
    "==": 6, "!=": 6, "<": 6, "<=": 6, ">": 6, ">=": 6,
    "|": 7, "^": 8, "&": 9, "<<": 10, ">>": 10, "+": 11, "-": 11,
    "*": 12, "/": 12, "//": 12, "%": 12, "@": 12, "unary": 13, "**": 14, "atom": 16,
}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


def _prec(e: A.Expr) -> int:
    if isinstance(e, A.BinOp):
        return _PREC[e.op]
    if isinstance(e, A.UnaryOp):
        return _PREC["not"] if e.op == "not" else _PREC["unary"]
    if isinstance(e, A.BoolOp):
        return _PREC[e.op]
    if isinstance(e, A.IfExp):
        return _PREC["if"]
    if isinstance(e, A.Lambda):
        return _PREC["lambda"]
    return _PREC["atom"]


def _wrap(e: A.Expr, need: int) -> str:
    text = expr(e)
    return f"({text})" if _prec(e) < need else text


def expr(e: A.Expr) -> str:
    """Print one expression with minimal parentheses."""
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.Bool):
        return "True" if e.value else "False"
    if isinstance(e, A.Int):
        return str(e.value)
    if isinstance(e, A.Float):
        return repr(e.value)
    if isinstance(e, A.Str):
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(e, A.BinOp):
        p = _PREC[e.op]
        if e.op in _COMPARE:  # never chain: a < b < c would re-parse as a BoolOp
            return f"{_wrap(e.left, p + 1)} {e.op} {_wrap(e.right, p + 1)}"
        if e.op == "**":  # right-associative
            return f"{_wrap(e.left, p + 1)} ** {_wrap(e.right, _PREC['unary'])}"
        return f"{_wrap(e.left, p)} {e.op} {_wrap(e.right, p + 1)}"
    if isinstance(e, A.UnaryOp):
        if e.op == "not":
            return f"not {_wrap(e.operand, _PREC['not'])}"
        return f"{e.op}{_wrap(e.operand, _PREC['unary'])}"
    if isinstance(e, A.BoolOp):
        p = _PREC[e.op]
        return f" {e.op} ".join(_wrap(v, p + 1) for v in e.values)
    if isinstance(e, A.IfExp):
        p = _PREC["if"]
        return f"{_wrap(e.then, p + 1)} if {_wrap(e.cond, p + 1)} else {_wrap(e.orelse, p)}"
    if isinstance(e, A.Lambda):
        params = ", ".join(e.params)
        return f"lambda {params}: {expr(e.body)}" if params else f"lambda: {expr(e.body)}"
    if isinstance(e, A.Call):
        args = [expr(a) for a in e.args] + [f"{k.name}={expr(k.value)}" for k in e.kwargs]
        return f"{_wrap(e.func, _PREC['atom'])}({', '.join(args)})"
    if isinstance(e, A.Subscript):
        return f"{_wrap(e.value, _PREC['atom'])}[{', '.join(expr(i) for i in e.indices)}]"
    if isinstance(e, A.Attribute):
        return f"{_wrap(e.value, _PREC['atom'])}.{e.attr}"
    if isinstance(e, A.Tuple):
        if len(e.elts) == 1:
            return f"({expr(e.elts[0])},)"
        return "(" + ", ".join(expr(x) for x in e.elts) + ")"
    raise TypeError(f"not an expression: {e!r}")


def _stmts(body: tuple[A.Stmt, ...], indent: str) -> list[str]:
    out: list[str] = []
    for s in body:
        out.extend(_stmt(s, indent))
    return out


def _stmt(s: A.Stmt, indent: str) -> list[str]:
    inner = indent + "    "
    if isinstance(s, A.Assign):
        return [f"{indent}{expr(s.target)} = {expr(s.value)}"]
    if isinstance(s, A.AugAssign):
        return [f"{indent}{expr(s.target)} {s.op}= {expr(s.value)}"]
    if isinstance(s, A.ExprStmt):
        return [f"{indent}{expr(s.expr)}"]
    if isinstance(s, A.Pass):
        return [f"{indent}pass"]
    if isinstance(s, A.Return):
        return [f"{indent}return" + (f" {expr(s.value)}" if s.value is not None else "")]
    if isinstance(s, A.For):
        return [f"{indent}for {s.var} in {expr(s.iter)}:"] + _stmts(s.body, inner)
    if isinstance(s, A.If):
        lines = [f"{indent}if {expr(s.cond)}:"] + _stmts(s.body, inner)
        orelse = s.orelse
        while len(orelse) == 1 and isinstance(orelse[0], A.If):
            nested = orelse[0]
            lines += [f"{indent}elif {expr(nested.cond)}:"] + _stmts(nested.body, inner)
            orelse = nested.orelse
        if orelse:
            lines += [f"{indent}else:"] + _stmts(orelse, inner)
        return lines
    raise TypeError(f"not a statement: {s!r}")


def kernel(k: A.Kernel) -> str:
    params = ", ".join(f"{p.name}: {expr(p.annotation)}" for p in k.params)
    lines = [f"@{expr(k.decorator)}", f"def {k.name}({params}):"]
    lines += _stmts(k.body, "    ") or ["    pass"]
    return "\n".join(lines) + "\n"


def helper(h: A.Helper) -> str:
    lines = [f"@{expr(h.decorator.func)}", f"def {h.name}({', '.join(p.name for p in h.params)}):"]
    lines += _stmts(h.body, "    ") or ["    pass"]
    return "\n".join(lines) + "\n"


def module(m: A.Module) -> str:
    """The canonical text of a whole file: imports, helpers, kernels (a parsed module's kernels have
    their helper calls inlined already, so they print inlined and re-parse to the same AST)."""
    parts = [f"from {i.module} import {', '.join(i.names)}\n" for i in m.imports]
    if parts and (m.kernels or m.helpers):
        parts.append("\n")
    parts.append("\n\n".join([helper(h) for h in m.helpers] + [kernel(k) for k in m.kernels]))
    return "".join(parts)
