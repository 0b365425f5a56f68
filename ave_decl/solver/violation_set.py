"""Exact violating sets over bounded variables, counted and described with pyeda (BDD + Espresso).

After a violation is found, the query is projected on a few bounded variables (for a matrix
instruction: the A operand's lane and value slot; for an assertion: the thread and slot) and
every violating point is enumerated with blocking clauses on an incremental solver. The set is
then minimised with Espresso into cubes and described in words, e.g.
"32 of 256 (lane, value) pairs: lane 32-63, value 2-3".
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3
from pyeda.inter import And, Or, espresso_exprs, exprvar

MAX_POINTS = 4096
BUDGET_S = 3.0  # past it the set is reported as a lower bound ("N+ of M")


@dataclass(frozen=True)
class Var:
    name: str
    term: z3.ArithRef
    size: int  # values 0..size-1

    @property
    def bits(self) -> int:
        return max(1, (self.size - 1).bit_length())


def enumerate_points(solver: z3.Solver, variables: list[Var]) -> tuple[set[tuple[int, ...]], bool]:
    """Every assignment of `variables` that extends to a model; (points, complete)."""
    points: set[tuple[int, ...]] = set()
    for v in variables:
        solver.add(v.term >= 0, v.term < v.size)
    deadline = time.monotonic() + BUDGET_S
    while len(points) < MAX_POINTS and time.monotonic() < deadline:
        result = solver.check()
        if result == z3.unsat:
            return points, True
        if result != z3.sat:
            return points, False
        m = solver.model()
        point = tuple(m.eval(v.term, model_completion=True).as_long() for v in variables)
        points.add(point)
        solver.add(z3.Or(*[v.term != p for v, p in zip(variables, point)]))
    return points, False


def describe(points: set[tuple[int, ...]], variables: list[Var], complete: bool) -> dict:
    total = 1
    for v in variables:
        total *= v.size
    bitvars = {v.name: [exprvar(f"{v.name}_{i}") for i in range(v.bits)] for v in variables}
    minterms = []
    for p in sorted(points):
        lits = []
        for v, value in zip(variables, p):
            for i, b in enumerate(bitvars[v.name]):
                lits.append(b if (value >> i) & 1 else ~b)
        minterms.append(And(*lits))
    cubes: list[dict[str, str]] = []
    if minterms:
        (cover,) = espresso_exprs(Or(*minterms).to_dnf())
        terms = cover.xs if cover.ASTOP == "or" else [cover]
        for term in terms:
            lits = term.xs if term.ASTOP == "and" else [term]
            fixed = {str(lit.inputs[0] if lit.ASTOP == "not" else lit): lit.ASTOP != "not" for lit in lits}
            cubes.append({v.name: _range(v, bitvars[v.name], fixed) for v in variables})
    names = ", ".join(v.name for v in variables)
    parts = ["; ".join(f"{k} {val}" for k, val in c.items()) for c in cubes]
    text = (f"{len(points)}{'' if complete else '+'} of {total} ({names}) "
            f"{'combination' if len(variables) == 1 else 'pairs' if len(variables) == 2 else 'tuples'}"
            + (": " + " | ".join(parts) if parts else ""))
    return {"variables": [v.name for v in variables], "count": len(points), "total": total, "complete": complete,
            "cubes": cubes, "description": text}


def _range(v: Var, bits, fixed: dict[str, bool]) -> str:
    """A cube's constraint on one variable: a range when only low bits are free, else a bit pattern."""
    pattern = [("1" if fixed[str(b)] else "0") if str(b) in fixed else "x" for b in bits]  # LSB first
    free = [c == "x" for c in pattern]
    if all(free):
        return "any"
    k = free.index(False) if False in free else len(free)
    if all(free[:k]) and not any(free[k:]):
        base = sum(1 << i for i, c in enumerate(pattern) if c == "1")
        lo, hi = base, min(v.size - 1, base + (1 << k) - 1)
        return str(lo) if lo == hi else f"{lo}-{hi}"
    return "bits " + "".join(reversed(pattern)) + " (MSB first)"
