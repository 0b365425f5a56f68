"""Families of obligations (ave_decl/solver/families.py) are sound: whenever a family's query is
UNSAT, so is every member's query it stands for.

Random "templates" of small linear integer formulas over x, y (ranged) and z (unranged) are
instantiated as 2-5 members that differ as real unrolled accumulators do: in numerals at linear
positions, in a sum's constant term (present, absent, changed, summands nested or flat), and in
the names of their variables (renamed consistently to fresh ones of the same range); and
sometimes adversarially: a variable renamed to one the member already uses elsewhere, two
variables swapped, one occurrence renamed on its own, a variable renamed to one of another
range, one occurrence read through an uninterpreted function, a factor or divisor changed, a
comparison changed, a summand added. Z3 itself is the oracle (ranges asserted as constraints,
as every execution keeps them):

* the AntiUnifier, used as FamilyProofs uses it (one parameter per vector of values, one
  generaliser per set of members shared by their queries, members that do not fit dropped and
  the rest generalised again), never renames a first member's variable that the member uses
  itself, keeps parameters out of products, divisions and moduli, and every member it keeps is
  the generalisation at its own values with its renaming (equivalent, by Z3), every execution
  of the member (its variables in their ranges) is one of the family at the member's values,
  and the family query's UNSAT is each member's;
* FamilyProofs end to end (clusters, retries, identical members, queries proved without their
  deferred kills and then with them): an obligation it reports proved has every query, kills
  included, UNSAT.

`test_the_properties_are_not_vacuous` checks (deterministically) that the generated families
are UNSAT, SAT and mismatched often enough for the soundness property to bite.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import z3
from conftest import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ave_decl.solver import families
from ave_decl.solver.divmod import DivModSimplifier
from ave_decl.solver.families import AntiUnifier, FamilyProofs, Mismatch, Posed
from ave_decl.solver.slicing import VariableSets

VARS = ("x", "y", "z")  # the template's variables
RANGES: dict[str, tuple[int, int] | None] = {"x": (0, 7), "y": (0, 7), "z": None}
# every variable a member may use: the template's, fresh ones of the same range, one of another
POOL = {**{f"{t}{suffix}": RANGES[t] for t in VARS for suffix in ("", "1", "2")}, "w": (0, 15)}
OPS = ("<", "<=", "==", "!=", ">=", ">")
SLOTS = 4  # numeral slots: sites sharing a slot vary together (one parameter where they agree)
FACTORS = (2, 3, -1)
DIVISORS = (2, 3, 4)
ADVERSARIAL = ("occurrence", "op", "range", "clash", "kill", "factor", "occurrence", "swap", "range", "shape", "op",
               "call")
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------- templates

@st.composite
def int_terms(draw, depth: int):
    """("v", var) | ("s", parts, slot, constant present, its position) | ("m", factor, term,
    factor first) | ("d"/"r", term, divisor) | ("-", a, b) | ("f", term): an uninterpreted
    function's application (as an index tensor's read)."""
    kind = draw(st.sampled_from(("v", "v", "s", "s", "m", "d", "r", "-", "f") if depth else ("v",)))
    if kind == "v":
        return ("v", draw(st.sampled_from(VARS)))
    if kind == "s":
        parts = tuple(draw(st.lists(int_terms(depth - 1), min_size=1, max_size=3)))
        present = True if len(parts) == 1 else draw(st.booleans())
        return ("s", parts, draw(st.integers(0, SLOTS - 1)), present, draw(st.integers(0, len(parts))))
    if kind == "m":
        return ("m", draw(st.sampled_from(FACTORS)), draw(int_terms(depth - 1)), draw(st.booleans()))
    if kind in ("d", "r"):
        return (kind, draw(int_terms(depth - 1)), draw(st.sampled_from(DIVISORS)))
    if kind == "f":
        return ("f", draw(int_terms(depth - 1)))
    return ("-", draw(int_terms(depth - 1)), draw(int_terms(depth - 1)))


@st.composite
def formulas(draw, depth: int = 1):
    """("c", op, lhs, rhs) | ("and"/"or", [formulas]) | ("not", formula)."""
    kind = draw(st.sampled_from(("c", "c", "c", "c", "and", "or", "not") if depth else ("c",)))
    if kind == "c":
        rhs = draw(st.one_of(st.builds(lambda s: ("n", s), st.integers(0, SLOTS - 1)), int_terms(1)))
        return ("c", draw(st.sampled_from(OPS)), draw(int_terms(2)), rhs)
    if kind == "not":
        return ("not", draw(formulas(depth - 1)))
    return (kind, tuple(draw(st.lists(formulas(depth - 1), min_size=2, max_size=2))))


@st.composite
def pinches(draw):
    """Two bounds on one sum that contradict each other for some constants: keeps a good share
    of the families UNSAT."""
    a, b = draw(st.sampled_from(VARS)), draw(st.sampled_from(("x", "y")))
    total = ("s", (("v", a), ("v", b)), draw(st.integers(0, SLOTS - 1)), draw(st.booleans()), 2)
    return [("c", "<=", total, ("n", draw(st.integers(0, SLOTS - 1)))),
            ("c", ">=", total, ("n", draw(st.integers(0, SLOTS - 1))))]


@st.composite
def queries(draw):
    """One query: 1-3 formulas, often with a pinch."""
    out = draw(st.lists(formulas(), min_size=1, max_size=3))
    if draw(st.integers(0, 3)):
        out[draw(st.integers(0, len(out) - 1)):0] = draw(pinches())
    return out


def _walk(node, counts: Counter) -> None:
    """Count the sites a member may vary: variable occurrences, factors and divisors,
    comparisons, sums."""
    kind = node[0]
    key = {"v": "v", "s": "s", "m": "f", "d": "f", "r": "f", "c": "o"}.get(kind)
    if key:
        counts[key] += 1
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            _walk(child, counts)
        elif isinstance(child, tuple):
            for c in child:
                _walk(c, counts)


@dataclass
class Member:
    """How one member instantiates the template (the first member: the template itself)."""

    values: dict[int, int]
    names: dict[str, str] = field(default_factory=lambda: {t: t for t in VARS})
    flips: frozenset[int] = frozenset()  # sums whose constant term is there when the template's is not, or not
    nested: bool = False  # sums of three terms or more as nested binary sums
    occurrence: dict[int, str | tuple] = field(default_factory=dict)  # one occurrence renamed on its own (or f(v))
    factors: dict[int, int] = field(default_factory=dict)  # a factor or divisor changed
    ops: dict[int, str] = field(default_factory=dict)  # a comparison changed
    shapes: frozenset[int] = frozenset()  # sums with one more summand
    adversarial: str | None = None


@dataclass
class Case:
    """A template and its members (the first: the template's own values and names)."""

    queries: list[list[tuple]]  # per query, its template formulas
    kills: list[tuple]  # per query, its deferred kill's template (FamilyProofs)
    has_kills: list[bool]
    members: list[Member]


@st.composite
def members(draw, counts: Counter, base: dict[int, int], adversarial: bool):
    values = {s: draw(st.one_of(st.just(v), st.just(v), st.sampled_from((v + 1, v - 2, v + 8)), st.integers(-3, 10)))
              for s, v in base.items()}
    flips = draw(st.sets(st.integers(0, counts["s"] - 1), max_size=2)) if counts["s"] else set()
    m = Member(values, names={t: draw(st.sampled_from((t, t, f"{t}1", f"{t}2"))) for t in VARS},
               flips=frozenset(flips), nested=draw(st.booleans()))
    if not adversarial:
        return m
    # 0-2 adversarial changes, renamings the likelier (they are what `_rename` and its checks decide)
    kinds = [k for k in ADVERSARIAL if k != "kill" or counts["kills"]]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=2)):
        m.adversarial = kind if m.adversarial is None else f"{m.adversarial}+{kind}"
        if kind == "clash":  # renamed to a variable of the same range that the member may use elsewhere
            t, u = draw(st.sampled_from((("x", "y"), ("y", "x"))))
            m.names[t] = u
        elif kind == "swap":
            m.names["x"], m.names["y"] = m.names["y"], m.names["x"]
        elif kind == "occurrence" and counts["v"]:
            m.occurrence[draw(st.integers(0, counts["v"] - 1))] = draw(st.sampled_from(sorted(POOL)))
        elif kind == "range":  # mostly a ranged variable renamed to an unranged one
            t = draw(st.sampled_from(("x", "y", "x", "y", "z")))
            m.names[t] = draw(st.sampled_from([n for n, r in POOL.items() if r != RANGES[t]]))
        elif kind == "factor" and counts["f"]:
            m.factors[draw(st.integers(0, counts["f"] - 1))] = draw(st.sampled_from((5, 6, 8)))
        elif kind == "op" and counts["o"]:
            m.ops[draw(st.integers(0, counts["o"] - 1))] = draw(st.sampled_from(OPS))
        elif kind == "kill" and counts["kills"]:  # a kill's comparison (the kills come last in the walk)
            m.ops[counts["o"] - 1 - draw(st.integers(0, counts["kills"] - 1))] = draw(st.sampled_from(OPS))
        elif kind == "call" and counts["v"]:  # one occurrence of a variable read through f
            m.occurrence[draw(st.integers(0, counts["v"] - 1))] = ("f", draw(st.sampled_from(sorted(POOL))))
        elif kind == "shape" and counts["s"]:
            m.shapes = frozenset({draw(st.integers(0, counts["s"] - 1))})
    return m


@st.composite
def cases(draw, min_members: int = 2, kills: bool = False, adversarial: bool = True):
    qs = draw(st.lists(queries(), min_size=1, max_size=2))
    ks = [draw(formulas(0)) for _ in qs] if kills else []
    counts: Counter = Counter()
    for f in [*(f for q in qs for f in q), *ks]:
        _walk(f, counts)
    counts["kills"] = len(ks)  # each one comparison
    base = {s: draw(st.integers(-2, 6)) for s in range(SLOTS)}  # slots often agree: one term, several counterparts
    n = draw(st.integers(min_members, 5))
    rest = [draw(members(counts, base, adversarial)) for _ in range(n - 1)]
    return Case(qs, ks, [draw(st.booleans()) if kills else False for _ in qs], [Member(dict(base)), *rest])


# ------------------------------------------------------------------------------- instances

class Builder:
    """A member's z3 terms for the template's (sites counted in one walk order per member)."""

    def __init__(self, member: Member, pool: dict[str, z3.ArithRef], f: z3.FuncDeclRef):
        self.m, self.pool, self.f = member, pool, f
        self.counts: Counter = Counter()

    def _site(self, key: str) -> int:
        self.counts[key] += 1
        return self.counts[key] - 1

    def term(self, node) -> z3.ArithRef:
        m, kind = self.m, node[0]
        ctx = next(iter(self.pool.values())).ctx
        if kind == "v":
            name = m.occurrence.get(self._site("v"), m.names[node[1]])
            return self.f(self.pool[name[1]]) if isinstance(name, tuple) else self.pool[name]
        if kind == "n":
            return z3.IntVal(m.values[node[1]], ctx)
        if kind == "s":
            _, parts, slot, present, pos = node
            i = self._site("s")
            terms = [self.term(p) for p in parts]
            if i in m.shapes:
                terms.append(self.pool["z"])
            if present != (i in m.flips):
                terms.insert(min(pos, len(terms)), z3.IntVal(m.values[slot], ctx))
            if len(terms) == 1:
                return terms[0]
            if m.nested:
                total = terms[0]
                for t in terms[1:]:
                    total = total + t  # binary sums, nested to the left
                return total
            return z3.Sum(terms)
        if kind == "m":
            _, factor, sub, first = node
            factor = m.factors.get(self._site("f"), factor)
            t = self.term(sub)
            return factor * t if first else t * factor
        if kind in ("d", "r"):
            divisor = m.factors.get(self._site("f"), node[2])
            t = self.term(node[1])
            return t / divisor if kind == "d" else t % divisor
        if kind == "-":
            return self.term(node[1]) - self.term(node[2])
        if kind == "f":
            return self.f(self.term(node[1]))
        raise AssertionError(node)

    def formula(self, node) -> z3.BoolRef:
        kind = node[0]
        if kind == "c":
            op = self.m.ops.get(self._site("o"), node[1])
            a, b = self.term(node[2]), self.term(node[3])
            return {"<": a < b, "<=": a <= b, "==": a == b, "!=": a != b, ">=": a >= b, ">": a > b}[op]
        if kind == "not":
            return z3.Not(self.formula(node[1]))
        parts = [self.formula(f) for f in node[1]]
        return z3.And(*parts) if kind == "and" else z3.Or(*parts)


@dataclass
class World:
    ctx: z3.Context
    pool: dict[str, z3.ArithRef]
    ranges: dict[int, tuple[int, int]]  # by AST id, as the encoder keeps them
    by_id: dict[int, z3.ExprRef]  # every term of the members, and the parameters
    queries: list[list[list[z3.BoolRef]]]  # per member, per query
    kills: list[list[z3.BoolRef]]  # per member, per query

    def range_constraints(self, keys) -> list[z3.BoolRef]:
        return [z3.And(self.by_id[k] >= self.ranges[k][0], self.by_id[k] <= self.ranges[k][1]) for k in keys
                if k in self.ranges]

    def solve(self, formulas: list[z3.BoolRef]) -> z3.CheckSatResult:
        """The query with every ranged variable's range asserted (a variable the formulas do not
        use is left free by them, so its range changes nothing)."""
        s = z3.Solver(ctx=self.ctx)
        s.add(*formulas)
        s.add(*[z3.And(v >= lo, v <= hi) for key, (lo, hi) in self.ranges.items() for v in (self.by_id[key],)])
        result = s.check()
        assert result in (z3.sat, z3.unsat), formulas
        return result


def world(case: Case) -> World:
    ctx = z3.Context()
    pool = {name: z3.Int(name, ctx) for name in POOL}
    ranges = {pool[n].get_id(): r for n, r in POOL.items() if r}
    qs, ks = [], []
    f = z3.Function("f", z3.IntSort(ctx), z3.IntSort(ctx))
    for m in case.members:
        b = Builder(m, pool, f)  # one walk: queries then kills, as _walk counted them
        qs.append([[b.formula(f) for f in q] for q in case.queries])
        ks.append([b.formula(f) for f in case.kills])
    # every term by its id: a variable may be renamed to a variable or to an application of f
    by_id: dict[int, z3.ExprRef] = {}
    stack = [*pool.values(), *(f for queries in qs for q in queries for f in q), *(f for kills in ks for f in kills)]
    while stack:
        t = stack.pop()
        if t.get_id() not in by_id:
            by_id[t.get_id()] = t
            stack.extend(t.children())
    return World(ctx, pool, ranges, by_id, qs, ks)


# ------------------------------------------------------------------------------- the AntiUnifier

def _valid(ctx: z3.Context, claim: z3.BoolRef) -> bool:
    s = z3.Solver(ctx=ctx)
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def check_generalisation(case: Case, tally: Counter | None = None) -> None:
    """Each query's members generalised as FamilyProofs does (`_generalised`, `_family_query`),
    and the generalisation checked against the members."""
    w = world(case)
    variables = VariableSets(w.ctx)
    unifiers: dict[tuple[int, ...], tuple[AntiUnifier, dict]] = {}  # per set of members, shared by the queries
    for i in range(len(case.queries)):
        formulas = [qs[i] for qs in w.queries]
        kept = list(range(len(formulas)))
        for _attempt in range(families.RETRIES + 1):
            if len(kept) < 2:
                break
            who = tuple(kept)
            if who not in unifiers:
                params: dict[tuple[int, ...], z3.ArithRef] = {}

                def param(values, params=params):
                    if values not in params:
                        params[values] = p = z3.Int(f"family!{len(params)}", w.ctx)
                        w.by_id[p.get_id()] = p
                    return params[values]

                unifiers[who] = (AntiUnifier(w.ctx, param, variables, w.ranges), params)
            unifier, params = unifiers[who]
            members = [formulas[n] for n in kept]
            try:
                general = unifier.generalise(members)
            except Mismatch as m:
                assert m.members and 0 not in m.members, m.members  # the first member never leaves
                kept = [n for j, n in enumerate(kept) if j not in m.members]
                if tally is not None:
                    tally["mismatch"] += 1
                continue
            _check_family(w, unifier, params, general, members, [case.members[n] for n in kept], tally)
            break


NONLINEAR = (z3.Z3_OP_MUL, z3.Z3_OP_DIV, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_REM, z3.Z3_OP_POWER)


def _assert_linear(general: list[z3.BoolRef], params: set) -> None:
    """No parameter is an operand of a product, a division or a modulus (a numeral there is not
    generalised: the family's query would be non-linear)."""
    ids = {p.get_id() for p in params}
    stack, seen = list(general), set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        if t.decl().kind() in NONLINEAR:
            assert not any(a.get_id() in ids for a in t.children()), t
        stack.extend(t.children())


def _check_family(w: World, unifier: AntiUnifier, params: dict, general: list[z3.BoolRef],
                  members: list[list[z3.BoolRef]], specs: list[Member], tally: Counter | None) -> None:
    assert len(general) == len(members[0])
    for values in params:
        assert len(values) == len(members) and len(set(values)) > 1  # a parameter stands for constants that differ
    _assert_linear(general, set(params.values()))
    renamed = unifier._renamed  # member -> {first member's variable: its own} (its own claim, checked here)
    for n, formulas in enumerate(members):
        own = set().union(*[VariableSets(w.ctx)(f) for f in formulas])
        # the first member's renamed variables do not occur in the member (else renaming is unsound)
        assert not set(renamed.get(n, {})) & own, (n, renamed, formulas)
        # the member is the generalisation at its values, its variables substituted for the first's
        pairs = [(p, z3.IntVal(values[n], w.ctx)) for values, p in params.items()]
        pairs += [(w.by_id[a], w.by_id[b]) for a, b in renamed.get(n, {}).items()]
        instance = [z3.substitute(f, *pairs) if pairs else f for f in general]
        assert _valid(w.ctx, z3.And(*instance) == z3.And(*formulas)), (n, specs[n], general, formulas, pairs)
        # so every execution the member allows (its variables in their ranges) is one its family
        # allows at the member's values: the ranges of the generalisation's variables, renamed,
        # hold too (the model-level form of "the family's UNSAT is the member's")
        ranges = w.range_constraints(set().union(*[VariableSets(w.ctx)(f) for f in general]))
        lifted = [z3.substitute(f, *pairs) if pairs else f for f in ranges]
        assert _valid(w.ctx, z3.Implies(z3.And(*formulas, *w.range_constraints(own)), z3.And(*instance, *lifted))), \
            ("a member's execution is not its family's", n, specs[n], general, formulas, pairs)
    query = [*general, z3.Or(*[z3.And(*[p == values[n] for values, p in params.items()])
                               for n in range(len(members))])] if params else general
    family = w.solve(query)
    if tally is not None:
        tally[str(family)] += 1
        tally["renamed"] += bool(any(renamed.values()))
        tally["adversarial kept"] += sum(s.adversarial is not None for s in specs[1:])
    if family == z3.unsat:  # the soundness claim: the family's UNSAT is every member's
        for n, formulas in enumerate(members):
            assert w.solve(formulas) == z3.unsat, ("family UNSAT but a member SAT", specs[n], formulas, general,
                                                   dict(params), renamed)


def _values(*vs: int) -> dict[int, int]:
    return {s: vs[s] if s < len(vs) else 0 for s in range(SLOTS)}


# x < 1 and x > 0: UNSAT; with its first x renamed on its own (z < 1 and x > 0), SAT: the first
# member's renamed variable occurs in the member
RENAMED_ONCE = Case([[("c", "<", ("v", "x"), ("n", 0)), ("c", ">", ("v", "x"), ("n", 1))]], [], [False],
                    [Member(_values(1, 0)), Member(_values(1, 0), occurrence={0: "z"}, adversarial="occurrence")])
# x + y <= -1: UNSAT in x's and y's ranges; z + y <= -1 is SAT (z has none)
RENAMED_OUT_OF_RANGE = Case([[("c", "<=", ("s", (("v", "x"), ("v", "y")), 0, False, 2), ("n", 1))]], [], [False],
                            [Member(_values(0, -1)), Member(_values(0, -1), names={"x": "z", "y": "y", "z": "z"},
                                                            adversarial="range")])
# unranged z, where the member reads f(x): renamed to that read (z := f(x) is a substitution too)
RENAMED_TO_A_READ = Case([[("c", ">", ("v", "z"), ("v", "y")), ("c", ">=", ("v", "y"), ("n", 0))]], [], [False],
                         [Member(_values(7)), Member(_values(6), occurrence={0: ("f", "x")}, adversarial="call")])
# the renaming of the first query (z := f(w)) stays the generaliser's in the second (one
# generaliser per set of members, as FamilyProofs keeps it), where neither occurs
ACROSS_QUERIES = Case([[("c", "<", ("v", "z"), ("n", 0))], [("c", "<", ("v", "x"), ("n", 0))]], [], [False, False],
                      [Member(_values()), Member(_values(), occurrence={0: ("f", "w")}, adversarial="call")])
# x < 1 and 0 < x: UNSAT; x < 1 and 0 >= x: SAT
OPERATOR = Case([[("c", "<", ("v", "x"), ("n", 0)), ("c", ">", ("v", "x"), ("n", 1))]], [], [False],
                [Member(_values(1, 0)), Member(_values(1, 0), ops={1: "<="}, adversarial="op")])
# x + 2 <= 1, x <= 3, x + 5 <= 1: the sum's constant (2, absent, 5) and the bound (1, 3, 1) vary
CONSTANTS = Case([[("c", "<=", ("s", (("v", "x"),), 0, True, 1), ("n", 1))]], [], [False],
                 [Member(_values(2, 1)), Member(_values(2, 3), flips=frozenset({0})), Member(_values(5, 1))])


@settings(max_examples=examples(150), **SETTINGS)
@given(cases())
@example(RENAMED_ONCE)
@example(RENAMED_OUT_OF_RANGE)
@example(CONSTANTS)
@example(OPERATOR)
@example(RENAMED_TO_A_READ)
@example(ACROSS_QUERIES)
def test_each_member_is_an_instance_of_the_generalisation_and_the_family_unsat_is_every_members(case):
    check_generalisation(case)


@settings(max_examples=examples(60), **SETTINGS)
@given(cases(adversarial=False))
def test_members_varying_only_as_unrolled_accumulators_do_always_fit(case):
    """Numerals at linear positions, constant terms and consistent renaming to fresh variables of
    the same range: the generaliser keeps every member."""
    w = world(case)
    variables = VariableSets(w.ctx)
    params: dict[tuple[int, ...], z3.ArithRef] = {}

    def param(values):
        return params.setdefault(values, z3.Int(f"family!{len(params)}", w.ctx))

    unifier = AntiUnifier(w.ctx, param, variables, w.ranges)
    for i in range(len(case.queries)):
        members = [qs[i] for qs in w.queries]
        unifier.generalise(members)  # raises Mismatch if a member is left out


# ------------------------------------------------------------------------------- FamilyProofs end to end

def check_family_proofs(case: Case, tally: Counter | None = None) -> None:
    """FamilyProofs over obligations whose posed queries are the members' (without kills: the
    query; with them: the query and its kill): an obligation it reports proved has every
    query, with its kill where it has one, UNSAT."""
    w = world(case)
    obligations = [(k, "inv", "k_pairing", k, None) for k in range(len(case.members))]
    index = {ob: k for k, ob in enumerate(obligations)}
    normaliser = DivModSimplifier(w.ranges, w.ctx)  # the kernel's, as Encoder.prepare uses it

    def build(ob):
        k = index[ob]
        return Posed(w.queries[k], list(case.has_kills),
                     lambda which, k=k: {i: [*w.queries[k][i], w.kills[k][i]] for i in which})

    def prove(formulas, _members):
        proved = w.solve(normaliser.normalise(formulas)) == z3.unsat
        if tally is not None:
            tally["family unsat" if proved else "family sat"] += 1
        return proved

    def param(index_, values):  # Solver._family_parameter: a ranged variable, its range in its name
        lo, hi = min(values), max(values)
        p = z3.Int(f"family!{index_}@{lo}..{hi}", w.ctx)
        w.ranges[p.get_id()] = (lo, hi)
        w.by_id[p.get_id()] = p
        return p

    proofs = FamilyProofs(obligations, build, prove, param, w.ctx, VariableSets(w.ctx), w.ranges)
    for ob in obligations:
        shape = proofs.proved(ob)
        if shape is None:
            continue
        k = index[ob]
        assert shape == len(case.queries)
        if tally is not None:
            tally["proved"] += 1
        for i, formulas in enumerate(w.queries[k]):
            strict = [*formulas, w.kills[k][i]] if case.has_kills[i] else formulas
            assert w.solve(strict) == z3.unsat, ("proved by its family but SAT", case.members[k], strict)


# x <= 0 is SAT; with its kill x < x, UNSAT. The second member poses the first's very query; the
# third's kill renames one x on its own (x < w, SAT): it leaves the family, and is not proved
DROPPED_FROM_KILLS = Case([[("c", "<=", ("v", "x"), ("n", 0))]], [("c", "<", ("v", "x"), ("v", "x"))], [True],
                          [Member(_values()), Member(_values()),
                           Member(_values(), occurrence={2: "w"}, adversarial="occurrence")])


@settings(max_examples=examples(80), **SETTINGS)
@given(cases(min_members=families.FAMILY_MIN, kills=True))
@example(DROPPED_FROM_KILLS)
def test_an_obligation_proved_by_its_family_has_every_query_unsat(case):
    check_family_proofs(case)


# ------------------------------------------------------------------------------- not vacuous

def test_the_properties_are_not_vacuous():
    """The generated families are UNSAT often (else the soundness property checks nothing),
    SAT often, rename variables and keep adversarial members (a clash that is harmless) and
    leave members out; FamilyProofs proves obligations."""
    tally: Counter = Counter()

    @settings(max_examples=40, derandomize=True, database=None, **SETTINGS)
    @given(cases())
    def generalisations(case):
        check_generalisation(case, tally)

    @settings(max_examples=25, derandomize=True, database=None, **SETTINGS)
    @given(cases(min_members=families.FAMILY_MIN, kills=True))
    def family_proofs(case):
        check_family_proofs(case, tally)

    generalisations()
    family_proofs()
    print(dict(tally))
    assert tally["unsat"] >= 5 and tally["sat"] >= 5, tally
    assert tally["mismatch"] >= 5 and tally["renamed"] >= 5 and tally["adversarial kept"] >= 1, tally
    assert tally["family unsat"] >= 3 and tally["proved"] >= 3, tally
