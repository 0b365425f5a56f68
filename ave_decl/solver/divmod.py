"""Range-aware normalisation of integer `div`/`mod` by positive constants in Z3 formulas.

Why: thread and lane decompositions (`tid // 64`, `(w * 64 + lane) % 128`), copy mappings
(`(e // 2 * 128 + t) * 2 + e % 2`) and operand maps nest div/mod many levels deep. Z3's
arithmetic solver treats each one as a fresh quotient/remainder pair and branches on them, so a
proof that is pure index algebra can take seconds. Most of those terms are simple once the ranges
of thread, lane, slot and loop variables are known: `(64 * q + lane) // 64 == q` when
`0 <= lane < 64`. This module rewrites a formula bottom-up with the rules polyhedral compilers
use for quasi-affine expressions (isl, MLIR affine, TVM's arith analyser):

* `(c*Q + R) // c == Q + R // c` and `(c*Q + R) % c == R % c` (multiples of c leave the remainder);
* `R // c == j` and `R % c == R - j*c` when R lies in one interval [j*c, (j+1)*c);
* `(g*S + B) // c == S // (c/g)` and `(g*S + B) % c == g * (S % (c/g)) + B` when g divides c and
  0 <= B < g (a small, aligned remainder never crosses a multiple of g);
* `(x // a) // b == x // (a*b)` and `(x % a) % b == x % b` when b divides a.

Each rule is an identity of integer arithmetic given the variable ranges; the ranges used are
returned so the caller asserts them (they hold for every execution: a thread id, lane, slot or
loop counter is in its range by definition), which keeps the rewrite an equivalence.
"""
from __future__ import annotations

from functools import lru_cache

import z3

from .raw_terms import (_app_decl, _arg, _ast_id, _ast_kind, _decl_kind, _get_sort, _num_args, _sort_kind,
                        application, int_binary, int_numeral_value, int_sum, made)

Interval = tuple[int, int]
Linear = tuple[dict[int, tuple[z3.ArithRef, int]], int]  # atom id -> (atom, coefficient), constant
# a rewritten term: (the top-level term it was asked for, to keep its id alive, or None; the
# rewritten term when it differs, or None; the ranged variables relied on, in first-use order,
# never mutated once stored; the result as a raw AST)
_Entry = tuple[z3.ExprRef | None, z3.ExprRef | None, dict[int, z3.ArithRef], z3.Ast]
_NO_RANGES: dict[int, z3.ArithRef] = {}  # shared by the entries that rely on none: never mutated


class DivModSimplifier:
    """Memoises rewritten terms and records which ranged variables each rewrite relied on.

    One simplifier may serve every query of a kernel (the encoder keeps one): a memo entry
    carries the ranged variables its rewrite used, so `normalise` asserts, per query, exactly
    the ranges that query's rewrites relied on, in first-use order, whatever was memoised."""

    def __init__(self, ranges: dict[int, Interval], ctx: z3.Context):
        self.ranges = ranges
        self.ctx = ctx
        # keyed by AST id: see _Entry
        self._memo: dict[int, _Entry] = {}
        self._cref = ctx.ref()
        self._intervals: dict[int, tuple[z3.ExprRef, Interval | None, dict[int, z3.ArithRef]]] = {}
        self._linears: dict[int, tuple[z3.ExprRef, Linear]] = {}
        self._divmods: dict[tuple[int, int, bool], tuple[z3.ArithRef, z3.ArithRef, dict[int, z3.ArithRef]]] = {}
        self._frames: list[dict[int, z3.ArithRef]] = [{}]  # ranged variables used, per open rewrite
        self._bounds: dict[int, list[z3.BoolRef]] = {}
        self._numerals: dict[int, z3.ArithRef] = {}

    @property
    def used(self) -> dict[int, z3.ArithRef]:
        """Ranged variables that the `formula` calls so far relied on."""
        return self._frames[0]

    # --------------------------------------------------------------- public
    def formula(self, f: z3.ExprRef) -> z3.ExprRef:
        return self._rewrite(f)

    def range_constraints(self) -> list[z3.BoolRef]:
        return self._range_constraints(self.used)

    def normalise(self, formulas: list[z3.BoolRef]) -> list[z3.BoolRef]:
        """The formulas rewritten, then the ranges those rewrites relied on (one query's worth).
        Most formulas of a query were rewritten for an earlier one (a kernel's queries share
        their chains): those are answered from the memo here, without a walk."""
        self._frames.append({})
        memo, c = self._memo, self._cref
        out = []
        for f in formulas:
            hit = memo.get(_ast_id(c, f.ast))
            if hit is None:
                out.append(self._rewrite(f))
                continue
            self._note(hit[2])
            out.append(f if hit[1] is None else hit[1])
        return out + self._range_constraints(self._frames.pop())

    def knows(self, key: int) -> bool:
        """Whether a memo entry depends on the AST `key` (a variable whose range is set late)."""
        return key in self._memo or key in self._intervals

    def _range_constraints(self, used: dict[int, z3.ArithRef]) -> list[z3.BoolRef]:
        out = []
        for key, var in used.items():
            if key not in self._bounds:
                lo, hi = self.ranges[key]
                self._bounds[key] = [var >= lo, var <= hi]
            out += self._bounds[key]
        return out

    def _note(self, used: dict[int, z3.ArithRef]) -> None:
        top = self._frames[-1]
        for key, var in used.items():
            if key not in top:
                top[key] = var

    # --------------------------------------------------------------- rewrite
    def _rewrite(self, t: z3.ExprRef) -> z3.ExprRef:
        try:
            entry = self._raw(t.as_ast(), t)
        except BaseException:
            # entries of the half-walked term hold raw pointers that only `t` kept alive:
            # once the caller drops it, Z3 may reuse their ids for other terms
            self._memo.clear()
            self._intervals.clear()
            self._divmods.clear()
            self._frames = [{}]
            raise
        self._note(entry[2])
        return t if entry[1] is None else entry[1]

    def _raw(self, a: z3.Ast, keep: z3.ExprRef | None = None) -> _Entry:
        """Rewrite one AST through the C API (a Python wrapper per node would cost most of the
        time) and return its memo entry; entries hold a wrapper of each term they create, and of
        `keep`, the caller's top-level term, so their ids stay theirs. Children stay alive through
        their parents. A term's ranged variables are its children's, in order, then those its own
        div/mod rewrite relied on (the only rewrite that asks for intervals)."""
        c, memo = self._cref, self._memo
        key = _ast_id(c, a)
        hit = memo.get(key)
        if hit is not None:
            return hit
        made: z3.ExprRef | None = None
        used = _NO_RANGES
        n = _num_args(c, a) if _ast_kind(c, a) == z3.Z3_APP_AST else 0
        if n:
            kids = [_arg(c, a, i) for i in range(n)]
            # most children were rewritten before (shared subterms): looked up without a call
            entries = [memo.get(_ast_id(c, k)) or self._raw(k) for k in kids]
            owned = False  # `used` is this entry's own dict (else a child's, shared)
            for entry in entries:
                if not entry[2] or entry[2] is used:
                    continue
                if not used:
                    used = entry[2]
                    continue
                for k, var in entry[2].items():
                    if k not in used:
                        if not owned:
                            used, owned = dict(used), True
                        used[k] = var
            decl = _app_decl(c, a)
            kind = _decl_kind(c, decl)
            divisor = self._positive_numeral(entries[1][3]) if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD) else None
            if divisor is not None:
                used = dict(used)
                self._frames.append(used)  # what _divmod's intervals rely on goes here
                made = self._divmod(kind == z3.Z3_OP_IDIV, _arith(entries[0][3], self.ctx), divisor)
                self._frames.pop()
            elif any(entry[3].value != kid.value for entry, kid in zip(entries, kids)):
                made = application(decl, [entry[3] for entry in entries], a, self.ctx)
        entry = (keep, made, used, a if made is None else made.as_ast())
        memo[key] = entry
        return entry

    def _positive_numeral(self, a: z3.Ast) -> int | None:
        v = self._numeral(a)
        return v if v is not None and v > 0 else None

    def _divmod(self, is_div: bool, x: z3.ArithRef, c: int) -> z3.ArithRef:
        """`x // c` or `x % c` rewritten, memoised by x's AST id, c and the operator (the entry
        keeps x): a quotient and its remainder, and the parts of sums they split into, are asked
        again by each division of the same sum (43 % of the calls in production attention)."""
        key = (_ast_id(self._cref, x.as_ast()), c, is_div)
        hit = self._divmods.get(key)
        if hit is not None:
            self._note(hit[2])
            return hit[1]
        self._frames.append({})
        r = self._divmod_of(is_div, x, c)
        used = self._frames.pop()
        self._divmods[key] = (x, r, used)
        self._note(used)
        return r

    def _divmod_of(self, is_div: bool, x: z3.ArithRef, c: int) -> z3.ArithRef:
        if c == 1:
            return x if is_div else self._int(0)
        terms, const = self._linear(x)
        # nested division / modulo of a single atom
        if not terms or (len(terms) == 1 and const == 0 and next(iter(terms.values()))[1] == 1):
            inner = next(iter(terms.values()))[0] if terms else None
            raw = inner.as_ast() if inner is not None else None
            a = self._numeral(_arg(self._cref, raw, 1)) if raw is not None and self._binary(raw) else None
            if a is not None:
                k = _decl_kind(self._cref, _app_decl(self._cref, raw))
                if is_div and k == z3.Z3_OP_IDIV and a > 0:
                    return self._divmod(True, self._child(raw, 0), a * c)
                if not is_div and k == z3.Z3_OP_MOD and a > 0 and a % c == 0:
                    return self._divmod(False, self._child(raw, 0), c)
        # multiples of c leave the remainder
        big = {k: (atom, a // c) for k, (atom, a) in terms.items() if a % c == 0}
        rest = {k: v for k, v in terms.items() if k not in big}
        quotient, const = divmod(const, c)
        if big or quotient:
            r = self._divmod(is_div, self._build(rest, const), c)
            if not is_div:
                return r
            remainder = self._numeral(r.as_ast())
            if remainder is not None:
                return self._build(big, quotient + remainder)
            return int_binary("add", self._build(big, quotient), r)
        # the remainder stays inside one multiple of c
        iv = self._interval_linear(rest, const)
        if iv is not None and iv[0] // c == iv[1] // c:
            j = iv[0] // c
            return self._int(j) if is_div else self._build(rest, const - j * c)
        # an aligned part and a small remainder: (g*S + B) with 0 <= B < g, g | c
        for g in _proper_divisors(c):
            aligned = {k: (atom, a // g) for k, (atom, a) in rest.items() if a % g == 0}
            small = {k: v for k, v in rest.items() if k not in aligned}
            if not aligned:
                continue
            biv = self._interval_linear(small, const)
            if biv is not None and biv[0] >= 0 and biv[1] < g:
                s = self._build(aligned, 0)
                if is_div:
                    return self._divmod(True, s, c // g)
                scaled = int_binary("mul", self._divmod(False, s, c // g), self._int(g))
                return int_binary("add", scaled, self._build(small, const))
        rebuilt = self._build(rest, const)
        return int_binary("floordiv" if is_div else "mod", rebuilt, self._int(c))

    # --------------------------------------------------------------- linear forms
    def _linear(self, t: z3.ArithRef) -> Linear:
        """t as sum(coefficient * atom) + constant; atoms are the non-linear subterms. Memoised
        by AST id (the entry keeps `t`, so the id stays its own): the same sums are decomposed
        again by every division of them and by every interval asked of them. Callers must not
        mutate the result."""
        key = _ast_id(self._cref, t.as_ast())
        hit = self._linears.get(key)
        if hit is None:
            hit = (t, self._linear_of(t))
            self._linears[key] = hit
        return hit[1]

    def _linear_of(self, t: z3.ArithRef) -> Linear:
        c, a = self._cref, t.as_ast()
        value = self._numeral(a)
        if value is not None:
            return {}, value
        k = _decl_kind(c, _app_decl(c, a)) if _ast_kind(c, a) == z3.Z3_APP_AST else None
        if k == z3.Z3_OP_ADD or k == z3.Z3_OP_SUB:
            parts = [self._linear(self._child(a, i)) for i in range(_num_args(c, a))]
            terms, const = dict(parts[0][0]), parts[0][1]
            sign = -1 if k == z3.Z3_OP_SUB else 1
            for p_terms, p_const in parts[1:]:
                const += sign * p_const
                for key, (atom, coefficient) in p_terms.items():
                    terms[key] = (atom, terms.get(key, (atom, 0))[1] + sign * coefficient)
            return {key: v for key, v in terms.items() if v[1] != 0}, const
        if k == z3.Z3_OP_UMINUS:
            terms, const = self._linear(self._child(a, 0))
            return {key: (atom, -coefficient) for key, (atom, coefficient) in terms.items()}, -const
        if k == z3.Z3_OP_MUL and _num_args(c, a) == 2:
            for i in (0, 1):
                f = self._numeral(_arg(c, a, i))
                if f is not None:
                    terms, const = self._linear(self._child(a, 1 - i))
                    return {key: (atom, x * f) for key, (atom, x) in terms.items() if x * f != 0}, const * f
        return {_ast_id(c, a): (t, 1)}, 0

    # ---------------------------------------------- raw getters (z3py's cost 3-5 us each)
    def _numeral(self, a: z3.Ast) -> int | None:
        """The value of an Int numeral (z3.is_int_value / as_long), else None."""
        return int_numeral_value(self._cref, a)

    def _binary(self, a: z3.Ast) -> bool:
        """An application of two arguments (z3.is_app and num_args() == 2)."""
        c = self._cref
        return _ast_kind(c, a) == z3.Z3_APP_AST and _num_args(c, a) == 2

    def _child(self, a: z3.Ast, i: int) -> z3.ArithRef:
        return _arith(_arg(self._cref, a, i), self.ctx)

    def _build(self, terms: dict[int, tuple[z3.ArithRef, int]], const: int) -> z3.ArithRef:
        parts = [atom if a == 1 else int_binary("mul", atom, self._int(a)) for atom, a in terms.values()]
        if const or not parts:
            parts.append(self._int(const))
        return int_sum(parts)

    def _int(self, v: int) -> z3.ArithRef:
        made = self._numerals.get(v)
        if made is None:
            made = self._numerals[v] = z3.IntVal(v, self.ctx)
        return made

    # --------------------------------------------------------------- intervals
    def _interval_linear(self, terms: dict[int, tuple[z3.ArithRef, int]], const: int) -> Interval | None:
        lo = hi = const
        for atom, a in terms.values():
            iv = self.interval(atom)
            if iv is None:
                return None
            lo += min(a * iv[0], a * iv[1])
            hi += max(a * iv[0], a * iv[1])
        return lo, hi

    def interval(self, t: z3.ArithRef) -> Interval | None:
        """Known bounds of an integer term from the variable ranges (None when unbounded)."""
        c, a = self._cref, t.as_ast()
        key = _ast_id(c, a)
        hit = self._intervals.get(key)
        if hit is not None:
            self._note(hit[2])
            return hit[1]
        self._frames.append({})
        r: Interval | None = None
        value = self._numeral(a)
        app = _ast_kind(c, a) == z3.Z3_APP_AST
        divisor = self._numeral(_arg(c, a, 1)) if value is None and app and _num_args(c, a) == 2 else None
        if value is not None:
            r = (value, value)
        elif app and _num_args(c, a) == 0:
            r = self.ranges.get(key)
            if r is not None:
                self._frames[-1][key] = t
        elif divisor is not None and divisor > 0:
            k = _decl_kind(c, _app_decl(c, a))
            inner = self.interval(self._child(a, 0)) if k in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD) else None
            if k == z3.Z3_OP_IDIV and inner is not None:
                r = (inner[0] // divisor, inner[1] // divisor)
            elif k == z3.Z3_OP_MOD:
                r = inner if inner is not None and inner[0] >= 0 and inner[1] < divisor else (0, divisor - 1)
        if r is None and app and _sort_kind(c, _get_sort(c, a)) in (z3.Z3_INT_SORT, z3.Z3_REAL_SORT):
            terms, const = self._linear(t)
            if len(terms) != 1 or next(iter(terms.values()))[0].get_id() != key:
                r = self._interval_linear(terms, const)
        used = self._frames.pop()
        self._intervals[key] = (t, r, used)
        self._note(used)
        return r


def _arith(a: z3.Ast, ctx: z3.Context) -> z3.ArithRef:
    """An arithmetic term's reference as an ArithRef whatever it is (a numeral too: this module
    reads only its AST), without z3py's probes of its kind and sort (`_to_expr_ref`)."""
    return made(z3.ArithRef, a, ctx)


@lru_cache(maxsize=256)
def _proper_divisors(c: int) -> tuple[int, ...]:
    """The divisors of c between 2 and c - 1, largest first (asked for each `//` and `%` by c)."""
    return tuple(sorted((d for d in range(2, c) if c % d == 0), reverse=True))
