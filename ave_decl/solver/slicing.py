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
ignores), or that only the chain of a matrix product's operand binds whose tag components the
property ignores (a row statistic meets a product's rows, which its A operand gives: the B
operand's loads, stores and lanes are not kept), and neither in the property nor in the query's
instances. Any subset of the constraints is a weakening, so this choice (and a stale variable
set) can only cost proofs, never soundness.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

import z3

from .chains import Alt, product_components, product_operands
from .deferred import Deferred
from .query import Query
from .raw_terms import _app_decl, _arg, _ast_id, _ast_kind, _decl_kind, _num_args
from .smt import Instance

T = TypeVar("T")

_NONE: frozenset[int] = frozenset()


def _per_object(table: dict[int, tuple], obj: object, make: Callable[[], T]) -> T:
    """`make()` memoised in `table` per object, by id, the object kept with its entry (so the id
    stays its own while the table lives); a slicer's instances, alternatives and constraint
    lists are shared by an obligation's queries."""
    known = table.get(id(obj))
    if known is None or known[0] is not obj:
        known = table[id(obj)] = (obj, make())
    return known[1]


class VariableSets:
    """The variables of terms (AST ids of their uninterpreted constants), memoised by AST id for
    a whole kernel: obligations restart their instances' names (smt.Encoder.restart_names), so
    later ones meet the chains, kills and tags of earlier ones as the same hash-consed terms
    (production attention: 170,454 lookups). Every term asked about is kept alive, so that no
    id in the memo is reused by Z3 for another term."""

    def __init__(self, ctx: z3.Context):
        self._cref = ctx.ref()
        self._memo: dict[int, frozenset[int]] = {}
        self._alive: list[z3.ExprRef] = []
        # id(term object) -> (it, its variables): the same objects are asked about again and again
        # (production attention: 215,000 lookups of 34,000 objects), and this skips the C call
        self._objects: dict[int, tuple[z3.ExprRef, frozenset[int]]] = {}

    def __call__(self, term: z3.ExprRef) -> frozenset[int]:
        seen = self._objects.get(id(term))
        if seen is not None and seen[0] is term:
            return seen[1]
        found = self._variables(term)
        self._objects[id(term)] = (term, found)
        return found

    def _variables(self, term: z3.ExprRef) -> frozenset[int]:
        c, memo = self._cref, self._memo
        root = term.as_ast()
        known = memo.get(_ast_id(c, root))
        if known is not None:
            return known
        self._alive.append(term)
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


class Slicer:
    """One obligation's slices: the parts, seeds and blocked sets of its queries, recognised by
    identity (its queries share their instances' and chains' constraints); variables through
    the kernel's `VariableSets`."""

    def __init__(self, ctx: z3.Context, variables: VariableSets | None = None):
        self._cref = ctx.ref()
        self.variables = variables if variables is not None else VariableSets(ctx)
        # id(part) -> (the part, (its formulas, their variables, {(seeds, blocked): slice},
        # {(id(seeds), id(blocked)) of interned sets: slice}, each formula's variables))
        self._parts: dict[int, tuple[list, tuple[list, frozenset[int], dict, dict, list]]] = {}
        self._interned: dict[tuple[int, ...], list[z3.BoolRef]] = {}  # one list per distinct slice (Z3 hash-conses)
        self._sets: dict[frozenset[int], frozenset[int]] = {}  # seeds and blocked sets, one object per content
        self._instances: dict[int, tuple[Instance, frozenset[int]]] = {}  # id(instance) -> (it, `_bound_by`)
        # id(alt) -> (the alternative, its tag's variables, per operand of its outermost product:
        # (the variables only that operand's chain binds, those of the tag components it gave))
        self._alts: dict[int, tuple[Alt, tuple[frozenset[int], tuple[tuple[frozenset[int], frozenset[int]], ...]]]] = {}

    def ignored(self, alt: Alt, compared: frozenset[int]) -> frozenset[int]:
        """Variables of `alt` a slice need not keep, for a property over `compared`: its tag's,
        and those that only one operand's chain of its outermost matrix product binds (no
        other step of the chain) where the property compares none of the tag components that
        operand gave. Why: a statistic broadcast compares rows, which the A operands give; the B
        operands' chains (K and V, with their loads, stores and lanes) were most of each slice
        (production attention: Z3's time on the broadcasts' slices 1.06 -> 0.18 s). Memoised per
        alternative, which an obligation's queries share."""
        out, operands = _per_object(self._alts, alt, lambda: (self.variables_of(alt.tag or ()), self._operands(alt)))
        for only, gave in operands:
            if not gave & compared:
                out = out | only
        return out

    def _operands(self, alt: Alt) -> tuple[tuple[frozenset[int], frozenset[int]], ...]:
        operands = product_operands(alt.chain)
        if operands is None or not alt.tag:
            return ()
        bound = [_NONE.union(*[self._bound_by(step.inst) for step in steps]) for steps in operands]
        from_a, from_b = product_components(alt)
        return tuple((only, self.variables_of(gave)) for only, gave in (
            (bound[1] - bound[0] - bound[2], from_a), (bound[2] - bound[0] - bound[1], from_b)) if only)

    def _bound_by(self, inst: Instance) -> frozenset[int]:
        """The variables an instance's environment binds, memoised per instance (the chains of
        an obligation's alternatives share most of theirs)."""
        return _per_object(self._instances, inst, lambda: self.variables_of(
            v for v in inst.env.values() if isinstance(v, z3.ExprRef)))

    def variables_of(self, terms: Iterable[z3.ExprRef]) -> frozenset[int]:
        return _NONE.union(*[self.variables(t) for t in terms])

    def interned(self, variables: frozenset[int]) -> frozenset[int]:
        """One object per set content: `part_slice` recognises seeds and blocked sets it met
        before by identity (an obligation's queries repeat a few of them hundreds of times)."""
        return self._sets.setdefault(variables, variables)

    def instance_variables(self, *instances: Instance) -> frozenset[int]:
        """The variables the instances' environments bind (`_bound_by`: slicing runs after an
        obligation's queries are built, so no environment changes meanwhile, and a stale set
        would only cost proofs)."""
        return _NONE.union(*[self._bound_by(inst) for inst in instances])

    def part_slice(self, part: list, seeds: frozenset[int], blocked: frozenset[int]) -> tuple[list[z3.BoolRef], int]:
        """`connected` of one part of queries' constraints (deferred kills left out), made once
        per part and per seeds and blocked variables that occur in it: the same list object
        each time, and one list for equal slices of different parts (their terms' ids), so
        equal slices are recognised by identity before any digest; and how many formulas the
        part has without its deferred kills. `seeds` and `blocked` from `interned` are
        recognised by identity."""
        formulas, present, slices, by_identity, each = _per_object(self._parts, part, lambda: self._part_entry(part))
        seen = by_identity.get((id(seeds), id(blocked)))
        if seen is not None and seen[0] is seeds and seen[1] is blocked:
            return seen[2], len(formulas)
        key = (seeds & present, blocked & present)
        hit = slices.get(key)
        if hit is None:
            made = self.connected(formulas, *key, each)
            c = self._cref
            hit = slices[key] = self._interned.setdefault(tuple(_ast_id(c, f.as_ast()) for f in made), made)
        by_identity[(id(seeds), id(blocked))] = (seeds, blocked, hit)
        return hit, len(formulas)

    def _part_entry(self, part: list) -> tuple[list, frozenset[int], dict, dict, list]:
        formulas = [c for c in part if not isinstance(c, Deferred)]
        each = [self.variables(c) for c in formulas]
        return formulas, _NONE.union(*each), {}, {}, each

    def connected(self, constraints: list[z3.BoolRef], seeds: frozenset[int], blocked: frozenset[int],
                  variables: list[frozenset[int]] | None = None) -> list[z3.BoolRef]:
        """The constraints without a blocked variable that are connected to `seeds` through
        shared variables (union-find), in their order; `variables`: each constraint's, when
        the caller has them (a part's are looked up once, not per seeds and blocked sets)."""
        parent: dict[int, int] = {}

        def root(v: int) -> int:
            while parent.get(v, v) != v:
                parent[v] = parent.get(parent[v], parent[v])
                v = parent[v]
            return v

        candidates = []
        if variables is None:
            variables = [self.variables(con) for con in constraints]
        for con, vs in zip(constraints, variables):
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
    pieces: tuple[list[z3.BoolRef], ...]  # the kept constraints, part by part
    violated: z3.BoolRef  # the negated property
    identity: tuple[int, ...]  # equal for slices made of the same parts' slices and property
    kept: int
    whole: int

    @property
    def formulas(self) -> list[z3.BoolRef]:
        """The kept constraints and the negated property: made when asked (for one query of
        each identity), not per query (production attention: 1.1 million list items)."""
        return [*(c for p in self.pieces for c in p), self.violated]


def query_slice(slicer: Slicer, q: Query) -> Slice | None:
    """The slice of `q` without its deferred kills, part by part (`Query.parts`, or the whole
    list): each part's constraints connected to the property's or the instances' variables.
    None when it keeps every constraint (the kill-free attempt asks that one) or the property
    has no variables (nothing to connect to)."""
    prop_vars = slicer.variables(q.violated)
    if not prop_vars:
        return None
    uses = slicer.instance_variables(q.site, q.lhs_inst, q.rhs_inst)
    ignored = slicer.ignored(q.lhs, prop_vars)
    if q.rhs is not q.lhs:
        ignored = ignored | slicer.ignored(q.rhs, prop_vars)
    blocked = slicer.interned(ignored - prop_vars - uses)
    seeds = slicer.interned(prop_vars | uses)
    made = [slicer.part_slice(part, seeds, blocked) for part in (q.parts or (q.constraints,))]
    pieces = tuple(piece for piece, _size in made)
    kept = sum(len(p) for p in pieces)
    whole = sum(size for _piece, size in made)  # the constraints without the deferred ones
    if kept == whole:
        return None
    identity = (*(id(p) for p in pieces), q.violated.get_id())
    return Slice(pieces, q.violated, identity, kept, whole)


SLICE_SAMPLE = 16  # an obligation's first slices, looked at before the rest are made (`promising`)


def promising(sample: list[tuple[object, Slice]]) -> bool:
    """Whether an obligation's first SLICE_SAMPLE slices leave `worth_slicing` a chance: some of
    them equal, or together keeping at most half their constraints. Why: slicing every query
    to find that it does not pay cost production attention's stored tags 85 ms (72 queries, 72
    distinct slices keeping 97 % of their constraints) and the packed GEMM 27 ms of its 0.45 s;
    over the examples' obligations with more queries than the sample, 23 are stopped here and
    none whose slices would have paid (Session 33)."""
    kept = sum(s.kept for _q, s in sample)
    whole = sum(s.whole for _q, s in sample)
    return len({s.identity for _q, s in sample}) < len(sample) or 2 * kept <= whole


def worth_slicing(queries: int, distinct: int, kept: int, whole: int) -> bool:
    """Whether an obligation's slices are worth an attempt: they collapse its queries (at most
    two thirds as many distinct slices, by identity: slices equal up to names are fewer still)
    or drop most of the constraints (`kept` of `whole` formulas, summed over the queries). Why:
    a slice that keeps 85 % of its query costs Z3 about as much as the query
    (speed/gemm_mma_pipelined's K coverage: 2.1 s became 3.4 s with every slice attempted)."""
    return 3 * distinct <= 2 * queries or 2 * kept <= whole


def weaker_slices(slices: dict[bytes, tuple[list[z3.BoolRef], ...]], ctx: z3.Context) -> dict[bytes, list[bytes]]:
    """For each slice (its formulas given as lists whose union they are: a slice's pieces and its
    property), the other slices whose formulas are a strict subset of its own: weaker queries,
    whose UNSAT is its UNSAT too. Why: production attention's statistic broadcasts have 162
    distinct slices per obligation, 90 of them a strict superset of another (an alternative that
    keeps one more constraint of the same chain); proving the others first settles those without
    a solver. Subsets are tested on big-integer bit masks over the formulas' AST ids (one
    operation per pair); a list shared by several slices (an interned piece) is masked once."""
    cref = ctx.ref()
    bit: dict[int, int] = {}
    of_list: dict[int, int] = {}  # id(list) -> its mask: the lists stay alive in `slices` meanwhile
    masks: dict[bytes, int] = {}
    for key, lists in slices.items():
        mask = 0
        for formulas in lists:
            part = of_list.get(id(formulas))
            if part is None:
                part = 0
                for f in formulas:
                    part |= 1 << bit.setdefault(_ast_id(cref, f.as_ast()), len(bit))
                of_list[id(formulas)] = part
            mask |= part
        masks[key] = mask
    return {key: [other for other, small in masks.items() if small != mask and small & mask == small]
            for key, mask in masks.items()}
