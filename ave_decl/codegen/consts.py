"""Known divisors of index expressions: the 16-byte alignment `ldmatrix` and vector copies need.

The divisors come from the AST (literal multiples, products, shifts, single-assignment names),
so a kernel that writes `8 * (lane // 16)` gets an aligned row address without a solver call.
"""
from __future__ import annotations

from math import gcd

from ..lang import ast as A
from ..lang.consts import const_int


def known_divisor(e: A.Expr, env: dict[str, int], defs: dict[str, A.Expr], depth: int = 0) -> int:
    """A positive integer that provably divides the value of `e` (1 when nothing is known; 0
    stands for the value 0, which every integer divides). `defs` maps single-assignment names
    to their defining expressions; `env` holds compile-time constants."""
    if depth > 64:
        return 1
    v = const_int(e, env)
    if v is not None:
        return abs(v)
    if isinstance(e, A.Name):
        d = defs.get(e.id)
        return known_divisor(d, env, defs, depth + 1) if d is not None else 1
    if isinstance(e, A.UnaryOp) and e.op in ("-", "+"):
        return known_divisor(e.operand, env, defs, depth + 1)
    if isinstance(e, A.BinOp):
        a = known_divisor(e.left, env, defs, depth + 1)
        if e.op in ("+", "-"):
            return gcd(a, known_divisor(e.right, env, defs, depth + 1))
        if e.op == "*":
            return a * known_divisor(e.right, env, defs, depth + 1)
        if e.op == "<<":
            s = const_int(e.right, env)
            return a << s if s is not None and 0 <= s < 32 else 1
    return 1


def single_assignments(body: tuple[A.Stmt, ...]) -> dict[str, A.Expr]:
    """Names assigned exactly once in the kernel, outside any loop or `if`, to a plain expression:
    their definition holds wherever they are used (the DSL has no other way to bind them)."""
    counts: dict[str, int] = {}
    defs: dict[str, A.Expr] = {}

    def walk(stmts: tuple[A.Stmt, ...], top: bool) -> None:
        for s in stmts:
            if isinstance(s, (A.Assign, A.AugAssign)) and isinstance(s.target, A.Name):
                counts[s.target.id] = counts.get(s.target.id, 0) + 1
                if top and isinstance(s, A.Assign):
                    defs[s.target.id] = s.value
            elif isinstance(s, A.For):
                counts[s.var] = counts.get(s.var, 0) + 2
                walk(s.body, False)
            elif isinstance(s, A.If):
                walk(s.body, False)
                walk(s.orelse, False)

    walk(body, True)
    return {n: e for n, e in defs.items() if counts.get(n) == 1}
