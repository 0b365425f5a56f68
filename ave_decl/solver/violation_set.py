"""Exact violating sets over bounded variables, counted and described with pyeda (BDD + Espresso).

After a violation is found, the query is projected on a few bounded variables (for a matrix
instruction: the A operand's lane and value slot; for an assertion: the thread and slot) and
every violating point is enumerated on an incremental solver, by splitting boxes of values. The set is
then minimised with Espresso into cubes and described in words, e.g.
"32 of 256 (lane, value) pairs: lane 32-63; value 2-3".

The enumeration's budget is deterministic (budgets.py): at most ENUM_MAX_POINTS points and
ENUM_TOTAL_RLIMIT Z3 resource units, so the count is the same whatever the machine load; the
set is "at least N" only when that budget ran out. A call stopped by the wall clock instead
(the user's --timeout, far above the budget) makes the count load-dependent: no set is reported.
The count is made from the violated query's canonical text in a fresh Z3 context (`SetQuery`), so
it depends on the query alone: counted in the kernel's context, the units a call spends depended
on what the process had made before (production attention's PV-layout variant: "128 of 256" in
one process, "at least 55" when its K pairing was decided after other obligations), and a text
can be counted by any process (solver/parallel.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import z3

from .budgets import ENUM_CALL_RLIMIT, ENUM_MAX_POINTS, ENUM_TOTAL_RLIMIT, rlimit_count, stopped_by_wall_clock
from .raw_terms import int_binary, numeral


@dataclass(frozen=True)
class Var:
    name: str
    term: z3.ArithRef
    size: int  # values 0..size-1

    @property
    def bits(self) -> int:
        return max(1, (self.size - 1).bit_length())


@dataclass(frozen=True)
class Enumeration:
    points: frozenset[tuple[int, ...]]
    complete: bool  # every violating point is in `points`
    wall_clock: bool  # a call hit the wall-clock timeout before the budget: the count is not reported
    calls: int
    rlimit: int  # resource units spent


LEAF_POINTS = 4  # a box this small is checked point by point
# The enumeration's solver settings. Its checks are one per violating point, nearly all satisfiable:
# no Hermite-normal-form cuts (Session 26), no relevancy filtering of what the search assigns and
# no bound propagation beyond the literals that exist (each costs more per check than it saves in
# a search that ends in a model: the examples' 17 sets 5.2 -> 1.9 s, 3.5x fewer units on the
# PV-layout variant's; every set identical, every one complete either way; docs/performance.md,
# Session 31). Only the effort changes: the points are those with a model whatever the search.
# No model is built after a SAT either (none is read): the 17 sets 1.85 -> 1.63 s, the same calls
# and resource units (Session 33). Not so for the budgeted proof attempts (`Encoder.quick_check`,
# tactic solvers): without models Z3 preprocesses bit-vector queries otherwise, and a swizzled
# GEMM mutant's check took 2.4 s instead of 1.4 s.
ENUMERATION_SETTINGS = (("arith.enable_hnf", False), ("smt.relevancy", 0), ("smt.arith.propagation_mode", 0),
                        ("model", False))


@dataclass(frozen=True)
class SetQuery:
    """A violated query and the bounded variables to project it on, as text: everything
    `violating_set` needs and no Z3 object, so that the count depends on the query alone (not on
    what the process made before: a count cut by the budget did) and any process can make it."""
    text: str  # SMT-LIB assertions, constants named canonically (canonical_model.canonical_text)
    variables: tuple[tuple[str, str, int], ...]  # (name, term over those constants as SMT-LIB, size)
    timeout_ms: int


def violating_set(query: SetQuery) -> dict | None:
    """The query's violating points, counted in a fresh context and described (`describe`); None
    when Z3 cannot read the text back, no point is found, or a call hit the wall clock (the count
    would depend on machine load)."""
    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    solver.set("timeout", query.timeout_ms)
    try:
        solver.from_string(query.text)
        terms = z3.parse_smt2_string(_declarations(query.text) + "".join(
            f"(assert (= {term} 0))" for _name, term, _size in query.variables), ctx=ctx)
    except z3.Z3Exception:  # a term Z3 prints but cannot read back
        return None
    variables = [Var(name, terms[i].arg(0), size) for i, (name, _term, size) in enumerate(query.variables)]
    found = enumerate_points(solver, variables)
    if found.wall_clock or not found.points:
        return None
    return describe(found.points, variables, found.complete)


def _declarations(text: str) -> str:
    """The declarations of a solver's SMT-LIB text (Z3 prints them before the assertions): read
    again with the variables' terms, they name the query's constants and functions (the same
    declarations in one context). Why not walk the read assertions for their symbols: 7 ms of
    each of production attention's PV-layout sets."""
    end = text.find("(assert")
    return text if end < 0 else text[:end]


def enumerate_points(solver: z3.Solver, variables: list[Var], total_rlimit: int = ENUM_TOTAL_RLIMIT,
                     call_rlimit: int = ENUM_CALL_RLIMIT, max_points: int = ENUM_MAX_POINTS) -> Enumeration:
    """Every assignment of `variables` that extends to a model, within a deterministic budget, by
    splitting boxes of their values: a box is checked with its ranges as assumptions (UNSAT: no
    point there, in one call), a SAT box is halved along its narrowest variable not yet fixed, and
    a box of at most LEAF_POINTS points is checked point by point (each SAT one a point, with no
    model taken). Why not one model per point with a blocking clause: building a model cost more than the check
    on the examples' thread sets (~0.35 ms each), every check carried all the blocking clauses, and
    the sets are mostly boxes (gemm_tail_unmasked_store 0.44 -> 0.24 s, gemm_helpers_b_offset
    0.74 -> 0.33 s; docs/performance.md, Session 29). The solver searches without
    Hermite-normal-form cuts (as the budgeted proof attempts do, smt.Encoder.quick_check). Past
    `max_points` the set is "at least N" only if one more point exists; a spent budget makes it
    "at least N"; a call stopped by the wall clock instead flags the result (its count would
    depend on load)."""
    points: set[tuple[int, ...]] = set()
    bounds = _Bounds(variables)
    for name, value in ENUMERATION_SETTINGS:
        solver.set(name, value)
    for v in variables:
        solver.add(v.term >= 0, v.term < v.size)
    start, used, calls, limit = rlimit_count(solver), 0, 0, 0
    complete, wall_clock = True, False
    boxes: list[tuple[tuple[int, int], ...]] = [tuple((0, v.size) for v in variables)]
    while boxes:
        box = boxes.pop()
        size = _points_in(box)
        if 1 < size <= LEAF_POINTS:  # its points, the first on top
            units = [tuple((x, x + 1) for x in p) for p in product(*[range(lo, hi) for lo, hi in box])]
            boxes.extend(reversed(units))
            continue
        if used >= total_rlimit:
            complete = False  # the budget is spent: "at least N"
            break
        if limit != min(call_rlimit, total_rlimit - used):  # set only when it changes (near the end)
            limit = min(call_rlimit, total_rlimit - used)
            solver.set("rlimit", limit)
        before = used
        result = solver.check(*bounds.inside(box))
        calls += 1
        used = rlimit_count(solver) - start
        if result == z3.unsat:
            continue
        if result != z3.sat:
            complete = False
            wall_clock = stopped_by_wall_clock(solver, used - before, limit)
            break
        if len(points) >= max_points:
            complete = False  # one more point exists beyond the cap
            break
        if size == 1:
            points.add(tuple(lo for lo, _hi in box))
            continue
        # the narrowest variable not yet fixed first: a value slot spans few values, and a box of
        # one slot value over every lane that is UNSAT rules out all those points in one call
        # (the PV-layout variant's sets, "value bits x0": 319 -> 163 calls)
        cut = min((i for i in range(len(box)) if box[i][1] - box[i][0] > 1), key=lambda i: box[i][1] - box[i][0])
        lo, hi = box[cut]
        mid = (lo + hi) // 2
        boxes.append(box[:cut] + ((mid, hi),) + box[cut + 1:])
        boxes.append(box[:cut] + ((lo, mid),) + box[cut + 1:])  # the lower half first
    return Enumeration(frozenset(points), complete, wall_clock, calls, used)


def _points_in(box: tuple[tuple[int, int], ...]) -> int:
    n = 1
    for lo, hi in box:
        n *= hi - lo
    return n


class _Bounds:
    """A box as assumptions: each variable's value, or the bounds its range does not give. The
    terms are made once per variable and value, through the C API (z3py's operators and their
    coercions were a seventh of an enumeration's profile: a point's value is asked again in
    every box around it)."""

    def __init__(self, variables: list[Var]):
        self._variables = variables
        self._made: dict[tuple[int, str, int], z3.BoolRef] = {}

    def inside(self, box: tuple[tuple[int, int], ...]) -> list[z3.BoolRef]:
        out: list[z3.BoolRef] = []
        for n, (v, (lo, hi)) in enumerate(zip(self._variables, box)):
            if hi - lo == 1:
                out.append(self._term(n, "eq", lo))
                continue
            if lo > 0:
                out.append(self._term(n, "ge", lo))
            if hi < v.size:
                out.append(self._term(n, "lt", hi))
        return out

    def _term(self, n: int, op: str, value: int) -> z3.BoolRef:
        made = self._made.get((n, op, value))
        if made is None:  # what z3py's operator makes, without its coercions (raw_terms.py)
            term = self._variables[n].term
            made = self._made[(n, op, value)] = int_binary(op, term, numeral(value, term.ctx))
        return made


def describe(points: set[tuple[int, ...]] | frozenset[tuple[int, ...]], variables: list[Var],
             complete: bool) -> dict:
    """Count, Espresso cubes and a one-line description; the cubes' union is exactly `points`.
    (pyeda is imported here: a check with no violation never needs it, and it costs a cold start.)"""
    from pyeda.inter import And, Or, espresso_exprs, exprvar

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
            cubes.append({v.name: _range(v, bitvars[v.name], _literals(lits)) for v in variables})
    names = ", ".join(v.name for v in variables)
    kind = "combination" if len(variables) == 1 else "pairs" if len(variables) == 2 else "tuples"
    parts = ["; ".join(f"{k} {val}" for k, val in c.items()) for c in cubes]
    if complete:
        text = f"{len(points)} of {total} ({names}) {kind}" + (": " + " | ".join(parts) if parts else "")
    else:
        text = (f"at least {len(points)} of {total} ({names}) {kind} (enumeration budget spent)"
                + (", among them: " + " | ".join(parts) if parts else ""))
    return {"variables": [v.name for v in variables], "count": len(points), "total": total, "complete": complete,
            "cubes": cubes, "description": text}


def _literals(lits) -> dict[str, bool]:
    """Bit variable name -> required value of one Espresso product term. pyeda gives a negated
    variable as a `Complement` literal (ASTOP 'lit', like a plain variable), not as a 'not' node."""
    from pyeda.boolalg.expr import Complement

    return {str(~lit if isinstance(lit, Complement) else lit): not isinstance(lit, Complement) for lit in lits}


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
