"""Query slicing: the part of a query's constraints its property can depend on.

Why: a statistic broadcast in production attention pairs 75 provenance alternatives of a full
value with 9 of the statistic, and each of the 648 queries carries ~200 constraints, most of
them about where the component the statistic dropped (the head dimension, through the V
chain) came from. The property compares only the row. Dropping constraints weakens a query
(every model of the query is a model of the slice), so a slice's UNSAT proves the query;
a slice's SAT proves nothing and the full query is asked as before. Alternatives that differ
only in what was dropped give the same slice up to variable names, so the 648 queries are 162
proofs of a few milliseconds each.

What is kept: the constraints connected to the property's variables through shared
variables, not counting any constraint over a *blocked* variable: one that occurs in the
compared values' tags but not in the property (the source instance of a component the property
ignores) nor in the query's instances. Any subset of the constraints is a weakening, so this choice
(and a stale variable set) can only cost proofs, never soundness.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import z3

from .deferred import Deferred
from .query import Query
from .raw_terms import _app_decl, _arg, _ast_id, _ast_kind, _decl_kind, _num_args

_NONE: frozenset[int] = frozenset()


class Slicer:
    """Variables of one obligation's terms (AST ids of their uninterpreted constants), memoised
    by AST id: the queries of an obligation share their instances' and chains' constraints."""

    def __init__(self, ctx: z3.Context):
        self._cref = ctx.ref()
        self._memo: dict[int, frozenset[int]] = {}
        # id(part) -> (the part, its formulas, their variables, {(seeds, blocked): slice})
        self._parts: dict[int, tuple[list, list, frozenset[int], dict]] = {}
        self._interned: dict[tuple[int, ...], list[z3.BoolRef]] = {}  # one list per distinct slice (Z3 hash-conses)

    def variables(self, term: z3.ExprRef) -> frozenset[int]:
        c, memo = self._cref, self._memo
        root = term.as_ast()
        known = memo.get(_ast_id(c, root))
        if known is not None:
            return known
        stack = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            key = _ast_id(c, node)
            if children_done:
                memo[key] = _NONE.union(*[memo[_ast_id(c, _arg(c, node, i))] for i in range(_num_args(c, node))])
                continue
            if key in memo:
                continue
            if _ast_kind(c, node) != z3.Z3_APP_AST:
                memo[key] = _NONE
                continue
            n = _num_args(c, node)
            if n == 0:
                uninterpreted = _decl_kind(c, _app_decl(c, node)) == z3.Z3_OP_UNINTERPRETED
                memo[key] = frozenset((key,)) if uninterpreted else _NONE
                continue
            stack.append((node, True))
            stack.extend((_arg(c, node, i), False) for i in range(n))
        return memo[_ast_id(c, root)]

    def variables_of(self, terms: Iterable[z3.ExprRef]) -> frozenset[int]:
        return _NONE.union(*[self.variables(t) for t in terms])

    def part_slice(self, part: list, seeds: frozenset[int], blocked: frozenset[int]) -> list[z3.BoolRef]:
        """`connected` of one part of queries' constraints (deferred kills left out), made once
        per part and per seeds and blocked variables that occur in it: the same list object
        each time, and one list for equal slices of different parts (their terms' ids), so
        equal slices are recognised by identity before any digest."""
        known = self._parts.get(id(part))
        if known is None or known[0] is not part:
            formulas = [c for c in part if not isinstance(c, Deferred)]
            known = self._parts[id(part)] = (part, formulas, self.variables_of(formulas), {})
        _part, formulas, present, slices = known
        key = (seeds & present, blocked & present)
        hit = slices.get(key)
        if hit is None:
            made = self.connected(formulas, *key)
            hit = slices[key] = self._interned.setdefault(tuple(c.get_id() for c in made), made)
        return hit

    def connected(self, constraints: list[z3.BoolRef], seeds: frozenset[int],
                  blocked: frozenset[int]) -> list[z3.BoolRef]:
        """The constraints without a blocked variable that are connected to `seeds` through
        shared variables (union-find), in their order."""
        parent: dict[int, int] = {}

        def root(v: int) -> int:
            while parent.get(v, v) != v:
                parent[v] = parent.get(parent[v], parent[v])
                v = parent[v]
            return v

        candidates = []
        for con in constraints:
            vs = self.variables(con)
            if not vs or vs & blocked:
                continue
            candidates.append((con, vs))
            first, *rest = vs
            r = root(first)
            for v in rest:
                rv = root(v)
                if rv != r:
                    parent[rv] = r
        wanted = {root(v) for v in seeds}
        return [con for con, vs in candidates if root(next(iter(vs))) in wanted]


class Slice(NamedTuple):
    formulas: list[z3.BoolRef]  # the kept constraints and the negated property
    identity: tuple[int, ...]  # equal for slices made of the same parts' slices and property
    kept: int
    whole: int


def query_slice(slicer: Slicer, q: Query) -> Slice | None:
    """The slice of `q` without its deferred kills, part by part (`Query.parts`, or the whole
    list): each part's constraints connected to the property's or the instances' variables.
    None when it keeps every constraint (the kill-free attempt asks that one) or the property
    has no variables (nothing to connect to)."""
    prop_vars = slicer.variables(q.violated)
    if not prop_vars:
        return None
    tags = [*(q.lhs.tag or ()), *(q.rhs.tag or ())]
    uses = slicer.variables_of(
        v for inst in (q.site, q.lhs_inst, q.rhs_inst) for v in inst.env.values() if isinstance(v, z3.ExprRef))
    blocked = slicer.variables_of(tags) - prop_vars - uses
    seeds = prop_vars | uses
    pieces = [slicer.part_slice(part, seeds, blocked) for part in (q.parts or (q.constraints,))]
    kept = sum(len(p) for p in pieces)
    whole = sum(1 for c in q.constraints if not isinstance(c, Deferred))
    if kept == whole:
        return None
    identity = (*(id(p) for p in pieces), q.violated.get_id())
    return Slice([*(c for p in pieces for c in p), q.violated], identity, kept, whole)


def worth_slicing(queries: int, distinct: int, kept: int, whole: int) -> bool:
    """Whether an obligation's slices are worth an attempt: they collapse its queries (at most
    two thirds as many distinct slices, by identity: slices equal up to names are fewer still)
    or drop most of the constraints (`kept` of `whole` formulas, summed over the queries). Why:
    a slice that keeps 85 % of its query costs Z3 about as much as the query
    (speed/gemm_mma_pipelined's K coverage: 2.1 s became 3.4 s with every slice attempted)."""
    return 3 * distinct <= 2 * queries or 2 * kept <= whole
