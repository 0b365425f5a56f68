"""Obligations that pose the same queries up to integer constants, proved once per family.

Why: a GEMM written for speed unrolls its accumulators, and each product is an obligation of
its own: speed/gemm_mma_pipelined's 16 MMAs pose their K pairing, K distinctness and stored
tags as 16 x 9 queries per rule, which differ only in the accumulator's row and column offsets
(`wn` in one, `wn + 8` in the next). Each was normalised and proved on its own (1.3 s of Z3 for
three rules); one query per family does it (~0.1 s).

How: the members' formulas are anti-unified (Plotkin's least general generalisation), in a
restricted form: where the members' terms differ only in an integer numeral, or in a sum's
constant term (present in some, absent in others), that constant becomes a parameter, one per
vector of the members' values (so a constant that varies the same way everywhere is one
parameter); sums are compared as flattened lists of terms, so `(bm + wm) + x` and
`bm + wm + 16 + x` meet. A numeral under a product, a division or a modulus is not generalised
(a parameter there would make the query non-linear): the member that differs there leaves the
family. Members whose instances were named apart (production attention's o0..o3 accumulate
through differently named loops) may differ in the names of integer variables of the same range
too: the first member's name stands for them. A condition that some members have and the others
negate (the two arms of a wave-specialised kernel) becomes "the condition == (a parameter is 1)".
The family's query is the generalised formulas
and "the parameters take the values of one member" (a disjunction over the members). Each member
is an instance of the generalisation at its own values (its own variables substituted for the
first member's, which must not occur in it otherwise), so the family's UNSAT proves every
member's query. A SAT or a spent budget proves nothing and each obligation is discharged on its
own as before, so verdicts and counterexamples are those the obligations give alone. The
members are built once: discharge goes on from what was built (solve.KernelSolver._posed).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import z3

from .raw_terms import (_app_decl, _arg, _ast_id, _ast_kind, _decl_kind, _get_sort, _num_args, _sort_kind, _unchecked,
                        application, int_numeral_value, int_sum, reference_of)

FAMILY_MIN = 3  # obligations of one rule and relation before their families are tried
RETRIES = 3  # members that do not fit are dropped and the rest generalised again, this many times
# obligations with more posed queries are left to discharge, whose slices and groups share their
# proofs across obligations already (production attention's statistic broadcasts: 648 queries
# each, 0.8 s in all; as families, 6.8 s)
MAX_QUERIES = 64
# the relations tried: a matrix product's operand checks and the stores of its results, which
# unrolled accumulators repeat; other relations' obligations, where they repeat, are proved
# faster by their slices (production attention's `rel` assertions: 0.1 s by slices, 0.3 s as
# families)
RELATIONS = frozenset({"k_pairing", "k_distinct", "stored_tag"})
# relations whose obligations (one per access) pose small kill-free queries of different shapes:
# proved a group of obligations at a time, as one disjunction (KernelSolver._cases_proved: what
# all cases share asserted once), not one Z3 call each
DISJUNCTIVE = frozenset({"in_bounds"})
DISJUNCTION_MAX = 16  # queries per disjunction (its work budget: as many quick attempts)

_NONLINEAR = frozenset({z3.Z3_OP_MUL, z3.Z3_OP_DIV, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_REM, z3.Z3_OP_POWER})
_is_eq_func_decl = _unchecked(z3.Z3_is_eq_func_decl)


class Mismatch(Exception):
    """The members (positions in the list generalised) whose terms differ from the first
    member's in more than a constant."""

    def __init__(self, members: set[int]):
        super().__init__(members)
        self.members = members


class AntiUnifier:
    """The generalisation of several lists of formulas of the same shape (one per member).
    `param(values)` gives the parameter standing for a constant with those values, one value per
    member (the same term for the same values). With `variables` (the kernel's VariableSets) and
    `ranges` (the encoder's), an integer variable of a member that stands where the first
    member has another one of the same range is renamed to it: each member is then an instance
    of the generalisation (its variables substituted for the first member's), which is enough
    for the family's UNSAT to be the member's, provided the first member's variable does not
    occur in the member itself (checked at the end)."""

    def __init__(self, ctx: z3.Context, param: Callable[[tuple[int, ...]], z3.ArithRef],
                 variables: Callable[[z3.ExprRef], frozenset[int]] | None = None,
                 ranges: dict[int, tuple[int, int]] | None = None):
        self.ctx = ctx
        self._c = ctx.ref()
        self._param = param
        self._memo: dict[tuple[int, ...], z3.ExprRef | None] = {}
        self._variables, self._ranges = variables, ranges
        self._renamed: dict[int, dict[int, int]] = {}  # member -> {first member's variable: its own}

    def generalise(self, members: list[list[z3.BoolRef]]) -> list[z3.BoolRef]:
        """One formula per position of the lists: the first member's where all agree. Raises
        Mismatch when some member differs elsewhere than in constants."""
        if len({len(m) for m in members}) != 1:
            raise Mismatch({k for k, m in enumerate(members) if len(m) != len(members[0])})
        out = []
        for formulas in zip(*members):
            made = self._term(tuple(f.as_ast() for f in formulas))
            out.append(formulas[0] if made is None else made)
        clashing = {k for k, renamed in self._renamed.items()
                    if not set(renamed).isdisjoint(frozenset().union(*map(self._variables, members[k])))}
        if clashing:  # a renamed variable of the first member is one of the member's own
            raise Mismatch(clashing)
        return out

    def _term(self, nodes: tuple) -> z3.ExprRef | None:
        """The generalisation of `nodes` (raw terms, one per member), or None when they are one
        term (the first member's then stands)."""
        ids = tuple(a.value for a in nodes)  # addresses: Z3 hash-conses terms
        if ids.count(ids[0]) == len(ids):
            return None
        if ids in self._memo:
            return self._memo[ids]
        c = self._c
        numerals = [_ast_kind(c, a) == z3.Z3_NUMERAL_AST for a in nodes]
        if all(numerals):
            values = tuple(int_numeral_value(c, a) for a in nodes)
            if None in values:  # a numeral of another sort
                raise Mismatch({k for k, v in enumerate(values) if v != values[0]} or {1})
            made = self._param(values)
        elif any(numerals):
            raise Mismatch({k for k, n in enumerate(numerals) if n != numerals[0]})
        else:
            decls = [_app_decl(c, a) for a in nodes]
            kinds = [_decl_kind(c, d) for d in decls]
            if z3.Z3_OP_ADD in kinds:
                made = self._sum(nodes)
            elif z3.Z3_OP_NOT in kinds and kinds.count(z3.Z3_OP_NOT) != len(kinds):
                made = self._polarity(nodes, kinds)
            else:
                made = self._application(nodes, decls)
        self._memo[ids] = made
        return made

    def _polarity(self, nodes: tuple, kinds: list[int]) -> z3.BoolRef:
        """Where some members have a condition and the others its negation (the two arms of a
        wave-specialised kernel: `w < 4` in one, `not (w < 4)` in the other), the condition
        generalised, equal to "a parameter is 1" (1 for the members with it, 0 for those with
        its negation). Why: production attention's arms pose the same K pairing and K
        distinctness queries but for these guards, two families of four where one of eight does."""
        c = self._c
        if any(_sort_kind(c, _get_sort(c, a)) != z3.Z3_BOOL_SORT for a in nodes):
            raise Mismatch({k for k, kind in enumerate(kinds) if kind != kinds[0]})
        signs = tuple(0 if kind == z3.Z3_OP_NOT else 1 for kind in kinds)
        inner = tuple(_arg(c, a, 0) if sign == 0 else a for a, sign in zip(nodes, signs))
        made = self._term(inner)
        condition = reference_of(None, inner[0], self.ctx) if made is None else made
        return condition == (self._param(signs) == 1)

    def _sum(self, nodes: tuple) -> z3.ExprRef:
        """Sums (or a term and a sum of it and a constant): their non-constant terms, flattened,
        generalised position by position, plus the constant terms' sum (a parameter where the
        members' differ)."""
        c = self._c
        parts = [self._summands(a) for a in nodes]
        width = len(parts[0][0])
        if any(len(terms) != width for terms, _k in parts):
            raise Mismatch({k for k, (terms, _c) in enumerate(parts) if len(terms) != width})
        out = []
        for i in range(width):
            column = tuple(terms[i] for terms, _k in parts)
            made = self._term(column)
            out.append(made if made is not None else reference_of(None, column[0], self.ctx))
        constants = tuple(k for _terms, k in parts)
        if len(set(constants)) > 1:
            out.append(self._param(constants))
        elif constants[0] or not out:
            out.append(z3.IntVal(constants[0], self.ctx))
        return int_sum(out)

    def _rename(self, nodes: tuple, differ: set[int]) -> z3.ExprRef:
        """The first member's variable, for members whose own variable stands there: integer
        variables (uninterpreted constants) of the same range, renamed consistently."""
        c = self._c
        first = _ast_id(c, nodes[0])
        if not self._renamable(nodes[0]):
            raise Mismatch(differ)
        for k in differ:
            own = _ast_id(c, nodes[k])
            renamed = self._renamed.setdefault(k, {})
            if (not self._renamable(nodes[k]) or self._ranges.get(own) != self._ranges.get(first)
                    or renamed.setdefault(first, own) != own):
                raise Mismatch({k})
        return reference_of(None, nodes[0], self.ctx)

    def _renamable(self, node) -> bool:
        c = self._c
        return (_decl_kind(c, _app_decl(c, node)) == z3.Z3_OP_UNINTERPRETED
                and _sort_kind(c, _get_sort(c, node)) == z3.Z3_INT_SORT)

    def _constant(self, node) -> int | None:
        """The value of a numeral or of a sum of numerals, else None."""
        value = int_numeral_value(self._c, node)
        if value is not None or _ast_kind(self._c, node) != z3.Z3_APP_AST:
            return value
        terms, constant = self._summands(node)
        return None if terms else constant

    def _summands(self, node) -> tuple[list, int]:
        """The non-constant terms of a (nested) sum, in order, and its constant terms' sum."""
        c = self._c
        terms, constant, stack = [], 0, [node]
        while stack:
            a = stack.pop()
            value = int_numeral_value(c, a)
            if value is not None:
                constant += value
            elif _decl_kind(c, _app_decl(c, a)) == z3.Z3_OP_ADD:
                stack.extend(_arg(c, a, i) for i in reversed(range(_num_args(c, a))))
            else:
                terms.append(a)
        return terms, constant

    def _application(self, nodes: tuple, decls: list) -> z3.ExprRef:
        c = self._c
        first, decl = nodes[0], decls[0]
        arity = _num_args(c, first)
        differ = {k for k, (a, d) in enumerate(zip(nodes, decls))
                  if _num_args(c, a) != arity or not _is_eq_func_decl(c, d, decl)}
        if differ and arity == 0 and self._variables is not None:
            return self._rename(nodes, differ)
        if differ:
            raise Mismatch(differ)
        nonlinear = _decl_kind(c, decl) in _NONLINEAR
        args = []
        for i in range(arity):
            column = tuple(_arg(c, a, i) for a in nodes)
            if nonlinear:  # a constant operand that differs would become a parameter there
                values = [self._constant(a) for a in column]
                if values[0] is not None and values.count(values[0]) != len(values):
                    raise Mismatch({k for k, v in enumerate(values) if v != values[0]})
            made = self._term(column)
            args.append(column[0] if made is None else made.as_ast())
        return application(decl, args, first, self.ctx)


@dataclass
class Posed:
    """An obligation's posed queries, as a family sees them."""

    formulas: list[list[z3.BoolRef]]  # per query: its formulas without the deferred kills
    has_kills: list[bool]
    with_kills: Callable[[list[int]], dict[int, list[z3.BoolRef]]]  # those queries' formulas, kills built
    own_side: bool = False  # its queries needed bit decompositions beyond the kernel's


class FamilyProofs:
    """Which obligations their families proved, decided per group of obligations of one rule
    and relation the first time one of them is asked about.

    `variables` and `ranges` let members differ in the names of their variables (AntiUnifier).
    `build(obligation)` gives its posed queries (`Posed`: without their deferred kills, a weaker
    query as discharge's first attempt, and with them on demand); None when a query is UNKNOWN
    before any solving (the obligation is then discharged on its own). `prove(formulas, n)`:
    whether a family's query of n members is UNSAT; `param(index, values)`: a family's
    parameter (a fresh variable with the values' range)."""

    def __init__(self, obligations: list[tuple],
                 build: Callable[[tuple], Posed | None],
                 prove: Callable[[list[z3.BoolRef], int], bool], param: Callable[[int, tuple[int, ...]], z3.ArithRef],
                 ctx: z3.Context, variables: Callable[[z3.ExprRef], frozenset[int]],
                 ranges: dict[int, tuple[int, int]],
                 prove_cases: Callable[[list[list[z3.BoolRef]]], bool] | None = None):
        self._groups: dict[tuple, list[tuple]] = {}
        for ob in obligations:
            if ob[2] in RELATIONS or (ob[2] in DISJUNCTIVE and prove_cases is not None):
                self._groups.setdefault(_group_of(ob), []).append(ob)
        self._build, self._prove, self._param, self.ctx = build, prove, param, ctx
        self._prove_cases = prove_cases
        self._variables, self._ranges = variables, ranges
        self._tried: set[tuple] = set()
        self._proved: dict[tuple, int] = {}  # obligation -> its posed queries, all proved
        # a cluster's generalisers and their parameters, per set of members (`_family_query`)
        self._unifiers: dict[tuple[int, ...], tuple[AntiUnifier, dict]] = {}

    def proved(self, obligation: tuple) -> int | None:
        """The number of posed queries of `obligation` when its families proved every one."""
        group = _group_of(obligation)
        if group not in self._tried:
            self._tried.add(group)
            self._try(self._groups.get(group, []))
        return self._proved.get(obligation)

    def _try(self, obligations: list[tuple]) -> None:
        if len(obligations) < FAMILY_MIN:
            return
        built = [self._build(ob) for ob in obligations]  # discharge goes on from these (no work lost)
        if obligations[0][2] in DISJUNCTIVE:
            self._prove_disjunctions(obligations, built)
            return
        for cluster in self._clusters(built):
            self._prove_cluster([obligations[k] for k in cluster], [built[k] for k in cluster])

    def _prove_disjunctions(self, obligations: list[tuple], built: list[Posed | None]) -> None:
        """Consecutive obligations, up to DISJUNCTION_MAX queries at a time, proved by one
        disjunction of all their queries (each a weaker formula than its obligation's: no kills
        are left out here, the queries have none). Obligations whose queries have kills, or bit
        decompositions of their own, are left to `discharge`: the cases of one disjunction reuse
        each other's variable names (names restart per obligation), harmless for cases that
        are alternatives, not for one case's definitions of bits another case's share; so are the
        obligations of a disjunction not proved (a violation among them, or a spent budget)."""
        group: list[tuple[tuple, Posed]] = []
        for ob, posed in zip(obligations, built):
            if posed is None or not posed.formulas or any(posed.has_kills) or posed.own_side:
                continue
            if group and sum(len(p.formulas) for _o, p in group) + len(posed.formulas) > DISJUNCTION_MAX:
                self._prove_group(group)
                group = []
            group.append((ob, posed))
        self._prove_group(group)

    def _prove_group(self, group: list[tuple[tuple, Posed]]) -> None:
        if len(group) < 2 or self._prove_cases is None:
            return
        if self._prove_cases([case for _ob, posed in group for case in posed.formulas]):
            for ob, posed in group:
                self._proved[ob] = len(posed.formulas)

    def _clusters(self, built: list[Posed | None]) -> list[list[int]]:
        """Members whose queries pairwise fit the first member of their cluster (checked on the
        queries without kills), each cluster of at least two."""
        clusters: list[list[int]] = []
        for k, posed in enumerate(built):
            if posed is None or not posed.formulas or len(posed.formulas) > MAX_QUERIES:
                continue
            home = next((c for c in clusters if self._pair_fits(built[c[0]], posed)), None)
            if home is None:
                clusters.append([k])
            else:
                home.append(k)
        return [c for c in clusters if len(c) >= 2]

    def _prove_cluster(self, obligations: list[tuple], built: list[Posed]) -> None:
        """Each query position in turn, for the members still able to be proved whole: their
        family without kills (one attempt's budget where the queries have kills), then, where
        that does not prove it, with them. A member that a position's family does not cover
        (it did not fit, or the family was not proved) is discharged on its own, and the
        cluster stops when fewer than two members are left (a violated member's family fails,
        and nothing more of its cluster is attempted: the PV-layout variant's K pairing)."""
        self._unifiers = {}
        alive = list(range(len(built)))
        for i in range(len(built[0].formulas)):
            kills = any(built[k].has_kills[i] for k in alive)
            covered = self._family_proved([built[k].formulas[i] for k in alive], alive, 1 if kills else None)
            rest = [k for k in alive if k not in covered]
            if kills and len(rest) >= 2:  # the kills of the members the family without them left
                covered += self._family_proved([built[k].with_kills([i])[i] for k in rest], rest)
            alive = sorted(covered)
            if len(alive) < 2:
                return
        for k in alive:
            self._proved[obligations[k]] = len(built[k].formulas)

    def _family_proved(self, formulas: list[list[z3.BoolRef]], members: list[int], budget: int | None = None
                       ) -> list[int]:
        """The members whose query (`formulas`, one list per member) their family's query
        proves, within a quick attempt's budget per member (or `budget` of them). Members that
        do not fit the family (their formulas differ in more than integer constants) form a
        family of their own, and so on: gemm_mfma_mi300x's K distinctness with kills split 4 + 4,
        and the second four had gone to `discharge` one by one, 9 queries each."""
        covered: list[int] = []
        todo = list(range(len(members)))
        while len(todo) >= 2:
            made = self._generalised([members[n] for n in todo], [formulas[n] for n in todo])
            if made is None:
                break
            fit, query = made
            if self._prove(query, budget or len(fit)):
                covered += fit
            todo = [n for n in todo if members[n] not in fit]
        return covered

    def _pair_fits(self, first: Posed, second: Posed) -> bool:
        """Whether two members pose as many queries and their first ones fit: a cheap test for a
        cluster (a member whose later queries do not fit leaves those families only)."""
        if len(first.formulas) != len(second.formulas):
            return False
        try:
            AntiUnifier(self.ctx, lambda _values: z3.Int("family!fits", self.ctx), self._variables,
                        self._ranges).generalise([first.formulas[0], second.formulas[0]])  # no query made
        except Mismatch:
            return False
        return True

    def _generalised(self, members: list[int], formulas: list[list[z3.BoolRef]]
                     ) -> tuple[list[int], list[z3.BoolRef]] | None:
        """The members that fit and their family's query: the generalised formulas and the
        disjunction over the members of their parameters' values; None when fewer than two fit.
        Members that pose the very same query are generalised once."""
        first_of: dict[tuple[int, ...], int] = {}  # a query's formulas -> its first member's position
        stands_for = [first_of.setdefault(tuple(f.as_ast().value for f in fs), n) for n, fs in enumerate(formulas)]
        kept = list(first_of.values())
        query = None
        for _attempt in range(RETRIES + 1):
            if len(kept) <= 1:
                query = formulas[kept[0]] if kept else None
                break
            try:
                query = self._family_query(tuple(members[n] for n in kept), [formulas[n] for n in kept])
                break
            except Mismatch as m:
                kept = [n for i, n in enumerate(kept) if i not in m.members]
        covered = [members[n] for n, first in enumerate(stands_for) if first in kept]
        return (covered, query) if query is not None and len(covered) >= 2 else None

    def _family_query(self, who: tuple[int, ...], formulas: list[list[z3.BoolRef]]) -> list[z3.BoolRef]:
        """The generalisation of distinct members' formulas and "the parameters take one
        member's values"; raises Mismatch. The members' queries share most of their terms
        (an operand's chain in every query), so one generaliser per set of members `who` of a
        cluster serves all its families, its memo and parameters with it (a parameter that
        some family's formulas do not use is constrained there too, harmlessly)."""
        if who not in self._unifiers:
            params: dict[tuple[int, ...], z3.ArithRef] = {}

            def param(values: tuple[int, ...]) -> z3.ArithRef:
                if values not in params:
                    params[values] = self._param(len(params), values)
                return params[values]

            self._unifiers[who] = (AntiUnifier(self.ctx, param, self._variables, self._ranges), params)
        unifier, params = self._unifiers[who]
        general = unifier.generalise(formulas)
        if not params:  # the members differ only in their variables' names
            return general
        which = [z3.And(*[p == values[n] for values, p in params.items()]) for n in range(len(formulas))]
        return [*general, z3.Or(*which)]


def _group_of(obligation: tuple) -> tuple:
    """Obligations that may form families: one rule (invariant) and relation."""
    _site, inv, relation, _lhs, _rhs = obligation
    return inv, relation
