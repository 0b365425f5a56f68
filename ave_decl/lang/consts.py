"""Compile-time integer values of AST expressions (Python semantics: `//` floors).

Launch shapes and input ranges at given sizes, and the constant loop bounds the code generator
unrolls, are evaluated here by walking the AST: never by `eval`.
"""
from __future__ import annotations

from . import ast as A

_INT_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "<<": lambda a, b: a << b if 0 <= b < 64 else None,
    ">>": lambda a, b: a >> b if 0 <= b < 64 else None,
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b), "<": lambda a, b: int(a < b),
    "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
}


def const_int(e: A.Expr, env: dict[str, int]) -> int | None:
    """The value of an integer expression over the names in `env`, or None if it is not constant."""
    if isinstance(e, A.Int):
        return e.value
    if isinstance(e, A.Bool):
        return int(e.value)
    if isinstance(e, A.Name):
        return env.get(e.id)
    if isinstance(e, A.UnaryOp):
        v = const_int(e.operand, env)
        if v is None:
            return None
        return {"-": -v, "+": v, "~": ~v, "not": int(v == 0)}[e.op]
    if isinstance(e, A.BinOp) and e.op in _INT_OPS:
        a, b = const_int(e.left, env), const_int(e.right, env)
        if a is None or b is None or (e.op in ("//", "%") and b == 0):
            return None
        return _INT_OPS[e.op](a, b)
    if isinstance(e, A.Call) and e.func_name in ("min", "max") and len(e.args) == 2:
        a, b = const_int(e.args[0], env), const_int(e.args[1], env)
        if a is None or b is None:
            return None
        return min(a, b) if e.func_name == "min" else max(a, b)
    return None
