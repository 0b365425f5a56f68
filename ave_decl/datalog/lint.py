"""Soufflé's own static checks, done before any engine runs: declarations, arity, types,
groundedness and stratification. gringo would accept some of these programs and silently
answer differently, so they are errors here (exit code 4), with the `.dl` file:line:col."""
from __future__ import annotations

from ..lang.errors import RuleError
from .program import (AdtTerm, Aggregate, Atom, BinTerm, Constraint, Functor, Nil, Num, Program, Record, Rule, Sym,
                      Term, UnTerm, Var, Wild)

PRIMITIVES = {"number", "symbol"}
_SYMBOL_FUNCTORS = {"cat", "substr", "to_string"}


def _known_type(prog: Program, typ: str) -> bool:
    return prog.primitive(typ) in PRIMITIVES or typ in prog.records or typ in prog.adts


def lint(prog: Program) -> None:
    for decl in prog.decls.values():
        for attr, typ in decl.attrs:
            if not _known_type(prog, typ):
                raise RuleError(f"attribute {decl.name}.{attr} has type '{typ}'; the portable profile allows number, "
                                f"symbol, their subtypes and unions, records and ADTs", decl.span)
    structured = [(n, n, f) for n, f in prog.records.items()]
    structured += [(b, a, f) for a, branches in prog.adts.items() for b, f in branches.items()]
    for name, owner, fields in structured:
        for attr, typ in fields:
            if not _known_type(prog, typ):
                raise RuleError(f"field {name}.{attr} has unknown or unsupported type '{typ}'",
                                prog.type_spans.get(owner))
    for name in sorted(prog.inputs | prog.outputs):
        if name not in prog.decls:
            raise RuleError(f"I/O directive for undeclared relation {name}", prog.io_spans.get(name))
    for rule in prog.rules:
        _check_rule(prog, rule)
    _check_strata(prog)


def aggregates_in(t: Term) -> list[Aggregate]:
    if isinstance(t, Aggregate):
        return [t]
    if isinstance(t, BinTerm):
        return aggregates_in(t.left) + aggregates_in(t.right)
    if isinstance(t, UnTerm):
        return aggregates_in(t.operand)
    if isinstance(t, Functor):
        return [a for x in t.args for a in aggregates_in(x)]
    return []


def literal_terms(lit) -> tuple[Term, ...]:
    return lit.args if isinstance(lit, Atom) else (lit.left, lit.right)


def inner_vars(agg: Aggregate) -> set[str]:
    out: set[str] = set()
    if agg.target is not None:
        _var_names(agg.target, out, inside=True)
    for lit in agg.body:
        for t in literal_terms(lit):
            _var_names(t, out, inside=True)
    return out


def _var_names(t: Term, out: set[str], inside: bool = False) -> set[str]:
    """Variables of a term; an aggregate's own variables only when `inside` (they are local to it)."""
    if isinstance(t, Aggregate):
        if inside:
            out |= inner_vars(t)
        return out
    if isinstance(t, Var):
        out.add(t.name)
    elif isinstance(t, BinTerm):
        _var_names(t.left, out, inside)
        _var_names(t.right, out, inside)
    elif isinstance(t, UnTerm):
        _var_names(t.operand, out, inside)
    elif isinstance(t, (Functor, Record, AdtTerm)):
        for a in t.args:
            _var_names(a, out, inside)
    return out


def pattern_vars(t: Term) -> set[str]:
    """Variables a positive atom's argument binds: plain ones and those inside record/ADT patterns."""
    if isinstance(t, Var):
        return {t.name}
    if isinstance(t, (Record, AdtTerm)):
        return set().union(*[pattern_vars(a) for a in t.args]) if t.args else set()
    return set()


def _check_divisions(t: Term, span) -> None:
    """Soufflé evaluates a division before the constraints that would guard it (measured: a
    `d != 0` guard in the same body does not prevent the abort), so the portable profile only
    divides by non-zero constants."""
    if isinstance(t, BinTerm):
        if t.op in ("/", "%"):
            if not isinstance(t.right, Num):
                raise RuleError(f"'{t.op}' by a non-constant divisor is outside the portable profile: Soufflé may "
                                f"evaluate it before any guard and abort on zero", span)
            if t.right.value == 0:
                raise RuleError(f"'{t.op}' by zero", span)
        _check_divisions(t.left, span)
        _check_divisions(t.right, span)
    elif isinstance(t, UnTerm):
        _check_divisions(t.operand, span)
    elif isinstance(t, Functor):
        for a in t.args:
            _check_divisions(a, span)
    elif isinstance(t, Aggregate):
        if t.target is not None:
            _check_divisions(t.target, span)
        for lit in t.body:
            for x in literal_terms(lit):
                _check_divisions(x, span)


def _check_aggregates(prog: Program, rule: Rule, outside: set[str]) -> None:
    """Aggregates: not in heads, not nested, each with its own grounded body."""
    for head in rule.heads:
        for arg in head.args:
            if aggregates_in(arg):
                raise RuleError("an aggregate in a rule head is outside the portable profile", head.span)
    for lit in rule.body:
        for t in literal_terms(lit):
            for agg in aggregates_in(t):
                where = lit.span
                for inner in agg.body:
                    if any(aggregates_in(x) for x in literal_terms(inner)) or (
                            agg.target is not None and aggregates_in(agg.target)):
                        raise RuleError("nested aggregates are outside the portable profile", where)
                    if isinstance(inner, Atom):
                        _check_atom(prog, inner, {})
                        if any(isinstance(a, (Record, AdtTerm, Nil)) for a in inner.args):
                            raise RuleError("a record or ADT pattern inside an aggregate is outside the portable "
                                            "profile (Soufflé 2.5 aborts on it with an internal assertion)", where)
                bound = set(outside)
                for inner in agg.body:
                    if isinstance(inner, Atom) and not inner.negated:
                        bound |= set().union(*[pattern_vars(a) for a in inner.args]) if inner.args else set()
                needed = inner_vars(agg)
                free = needed - bound
                if free:
                    raise RuleError(f"variable {sorted(free)[0]} is not grounded inside the aggregate", where)


def _check_atom(prog: Program, atom: Atom, types: dict[str, str]) -> None:
    decl = prog.decls.get(atom.name)
    if decl is None:
        raise RuleError(f"relation {atom.name} is not declared", atom.span)
    if len(atom.args) != decl.arity:
        raise RuleError(f"relation {atom.name} has {decl.arity} attributes, used with {len(atom.args)}", atom.span)
    for arg, (attr, typ) in zip(atom.args, decl.attrs):
        _type_term(arg, typ if typ in prog.records or typ in prog.adts else prog.primitive(typ), types, atom, prog)


def _check_rule(prog: Program, rule: Rule) -> None:
    types: dict[str, str] = {}
    for lit in rule.heads + rule.body:
        for t in literal_terms(lit):
            _check_divisions(t, lit.span)
    for atom in rule.heads + tuple(lit for lit in rule.body if isinstance(lit, Atom)):
        _check_atom(prog, atom, types)
    _check_subtypes(prog, rule)
    for head in rule.heads:
        if head.name in prog.inputs and rule.body:
            raise RuleError(f"input relation {head.name} cannot be derived by a rule", head.span)
        for arg in head.args:
            if isinstance(arg, Wild):
                raise RuleError("underscore in a rule head", head.span)
    # groundedness: positive atoms bind their plain variables; `X = term` binds X once term is bound.
    bound: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, Atom) and not lit.negated:
            for arg in lit.args:
                bound |= pattern_vars(arg)
    changed = True
    while changed:
        changed = False
        for lit in rule.body:
            if isinstance(lit, Constraint) and lit.op == "=":
                for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(a, Var) and a.name not in bound and _var_names(b, set()) <= bound:
                        bound.add(a.name)
                        changed = True
    _check_aggregates(prog, rule, bound)
    for lit in rule.body:
        needed = set()
        if isinstance(lit, Atom) and lit.negated:
            for arg in lit.args:
                _var_names(arg, needed)
        elif isinstance(lit, Constraint):
            _var_names(lit.left, needed)
            _var_names(lit.right, needed)
        elif isinstance(lit, Atom):
            for arg in lit.args:
                if not isinstance(arg, (Var, Record, AdtTerm)):
                    _var_names(arg, needed)
        free = needed - bound
        if free:
            raise RuleError(f"variable {sorted(free)[0]} is not grounded (bind it in a positive atom)", lit.span)
    for head in rule.heads:
        free = set().union(*[_var_names(a, set()) for a in head.args]) - bound if head.args else set()
        if free:
            raise RuleError(f"head variable {sorted(free)[0]} is not grounded", head.span)


def _check_subtypes(prog: Program, rule: Rule) -> None:
    """Soufflé's subtype rules, as measured on Soufflé 2.5: a variable's type is the meet of the
    attribute types of its positive body positions (empty: "unable to deduce"); a variable in a
    head must have a type that is a subtype of the head attribute's; negations are not checked."""
    deduced: dict[str, frozenset[str]] = {}
    for lit in rule.body:
        if isinstance(lit, Atom) and not lit.negated:
            for arg, (_attr, typ) in zip(lit.args, prog.decls[lit.name].attrs):
                if isinstance(arg, Var):
                    t = prog.leaves(typ)
                    meet = prog.meet(deduced[arg.name], t) if arg.name in deduced else t
                    if not meet:
                        raise RuleError(f"unable to deduce type for variable {arg.name}: it is used as "
                                        f"{_show(deduced[arg.name])} and as {_show(t)}", lit.span)
                    deduced[arg.name] = meet
    for head in rule.heads:
        for arg, (_attr, typ) in zip(head.args, prog.decls[head.name].attrs):
            if isinstance(arg, Var) and arg.name in deduced and not prog.is_subtype(deduced[arg.name],
                                                                                     prog.leaves(typ)):
                raise RuleError(f"variable {arg.name} has type {_show(deduced[arg.name])}, not a subtype of "
                                f"{head.name}'s attribute type {typ}", head.span)


def _show(t: frozenset[str]) -> str:
    return " | ".join(sorted(t))


def _type_term(t: Term, want: str, types: dict[str, str], where, prog: Program | None = None) -> None:
    if isinstance(t, (Record, Nil, AdtTerm)):
        _type_structured(t, want, types, where, prog)
        return
    got = _infer(t, types)
    if isinstance(t, Var):
        prev = types.setdefault(t.name, want)
        if prev != want:
            raise RuleError(f"variable {t.name} is used as both {prev} and {want}", where.span)
    elif got is not None and got != want:
        raise RuleError(f"a {got} value where {where.name} expects a {want}", where.span)


def _type_structured(t: Term, want: str, types: dict[str, str], where, prog: Program | None) -> None:
    """A record or ADT value against the (nominal) type of its position, field by field."""
    assert prog is not None
    if isinstance(t, Nil):
        if want not in prog.records:
            raise RuleError(f"type mismatch: nil where {where.name} expects a {want}", where.span)
        return
    if isinstance(t, Record):
        fields = prog.records.get(want)
        if fields is None:
            raise RuleError(f"type mismatch: a record where {where.name} expects a {want}", where.span)
        if len(fields) != len(t.args):
            raise RuleError(f"ambiguous record: type {want} has {len(fields)} fields, the value has {len(t.args)}",
                            where.span)
    else:
        assert isinstance(t, AdtTerm)
        adt = prog.branches.get(t.branch)
        if adt is None:
            raise RuleError(f"unknown ADT branch ${t.branch}", where.span)
        if adt != want:
            raise RuleError(f"type mismatch: ${t.branch} is a {adt}, but {where.name} expects a {want}", where.span)
        fields = prog.adts[adt][t.branch]
        if len(fields) != len(t.args):
            raise RuleError(f"${t.branch} has {len(fields)} fields, the value has {len(t.args)}", where.span)
    for arg, (_f, ftype) in zip(t.args, fields):
        _type_term(arg, ftype if ftype in prog.records or ftype in prog.adts else prog.primitive(ftype), types,
                   where, prog)


def _infer(t: Term, types: dict[str, str]) -> str | None:
    if isinstance(t, (Num, BinTerm, UnTerm, Aggregate)):
        return "number"
    if isinstance(t, Sym):
        return "symbol"
    if isinstance(t, Functor):
        return "symbol" if t.name in _SYMBOL_FUNCTORS else "number"
    if isinstance(t, Var):
        return types.get(t.name)
    return None


def _check_strata(prog: Program) -> None:
    """Tarjan SCCs over the predicate graph; a negative edge inside an SCC is unstratifiable."""
    edges: dict[str, set[tuple[str, bool, object]]] = {}
    for rule in prog.rules:
        for head in rule.heads:
            for lit in rule.body:
                if isinstance(lit, Atom):
                    edges.setdefault(head.name, set()).add((lit.name, lit.negated, lit.span))
                for t in literal_terms(lit):
                    for agg in aggregates_in(t):  # an aggregate needs its body complete: like negation
                        for inner in agg.body:
                            if isinstance(inner, Atom):
                                edges.setdefault(head.name, set()).add((inner.name, True, lit.span))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comp: dict[str, int] = {}
    counter = [0]

    def strong(v: str) -> None:
        work = [(v, iter(sorted(edges.get(v, ()), key=lambda e: e[0])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w, _neg, _sp in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ()), key=lambda e: e[0]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = index[node]
                    if w == node:
                        break

    for v in sorted(set(edges) | {w for es in edges.values() for w, _, _ in es}):
        if v not in index:
            strong(v)
    for head, es in edges.items():
        for w, neg, span in es:
            if neg and comp.get(head) == comp.get(w):
                raise RuleError(f"unable to stratify: {head} depends negatively on {w} within a recursive cycle", span)
