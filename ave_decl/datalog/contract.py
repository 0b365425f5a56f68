"""What the solver requires of the rows the rules derive, checked on the rule text.

`lint.py` checks the Soufflé profile; this module checks the contract between the rules and the
solver stage, so a rule that could only fail at run time (or be silently reported with the wrong
severity) is a rule error (exit code 4) at load time, with the rule's `.dl` file:line:col:

* the invariant id in a head of `obligation` / `structural` / `unchecked` is the `@id` of the file
  the rule is in: the report takes the title and `@severity` from the file with that id;
* `@severity` is `error` or `warning` (any other word would silently be a warning);
* a constant `relation` of `obligation` is one of the `@relations` that rules/obligations.dl
  declares (the solver's vocabulary; tests/test_hardening_engines.py keeps the two equal);
* an obligation of relation `rel` (the lambda of an `assert_tag`) is at an `assert_tag` site: its
  kernel and site are bound by `assert_rel(k, s, ...)`, directly or through derived relations
  whose every rule binds those positions so (a greatest fixpoint over the rules).

What the text does not decide (a relation computed from a variable) is left to the solver.
"""
from __future__ import annotations

from ..lang.errors import RuleError
from .program import Atom, Constraint, Program, Rule, Sym, Term, Var

FINDINGS = ("obligation", "structural", "unchecked")  # relations whose rows become findings
INVARIANT_POS, RELATION_POS, KERNEL_POS, SITE_POS = 2, 3, 0, 1
SEVERITIES = ("error", "warning")
VOCABULARY_FILE = "ave/obligations"  # the @id of the file whose @relations lists the solver's relations
SITE_RELATION = "assert_rel"  # (k, s, ...): the assert_tag sites, the only ones a "rel" obligation may use

Pair = tuple[int, int]  # (kernel position, site position) of a relation


def check_contract(prog: Program) -> None:
    """Raise the first RuleError of the contract (a no-op for programs without the finding relations)."""
    if "obligation" not in prog.decls:
        return
    _check_headers(prog)
    ids = {m.path: m.id for m in prog.files}
    known = {m.id for m in prog.files if m.id}
    kinds = relation_kinds(prog)
    sites = assert_sites(prog)
    for rule in prog.rules:
        for head in rule.heads:
            if head.name not in FINDINGS or len(head.args) <= INVARIANT_POS:
                continue
            _check_invariant_id(rule, head, ids.get(head.span.path), known)
            if head.name == "obligation" and len(head.args) > SITE_POS:
                _check_relation(prog, rule, head, kinds, sites)


def relation_kinds(prog: Program) -> frozenset[str] | None:
    """The obligation relations the solver knows, from the `@relations` header field (None: no such file)."""
    for meta in prog.files:
        if meta.id == VOCABULARY_FILE and "relations" in meta.fields:
            return frozenset(meta.fields["relations"].replace(",", " ").split())
    return None


def _check_headers(prog: Program) -> None:
    for meta in prog.files:
        sev = meta.fields.get("severity")
        if sev is not None and sev not in SEVERITIES:
            raise RuleError(f"@severity '{sev}' is neither 'error' nor 'warning'", meta.spans.get("severity"))


def _check_invariant_id(rule: Rule, head: Atom, own: str | None, known: set[str]) -> None:
    inv = _constant(rule, head.args[INVARIANT_POS])
    if inv is None:
        return  # computed: nothing to decide here
    if own and inv != own:
        raise RuleError(f"{head.name} row for invariant '{inv}' in the file of '{own}': a file's findings use "
                        f"its own @id, which gives them its title and @severity", head.span)
    if not own and inv not in known:
        raise RuleError(f"{head.name} row for invariant '{inv}', but no rule file has '// @id {inv}' (its title "
                        f"and @severity would be unknown)", head.span)


def _check_relation(prog: Program, rule: Rule, head: Atom, kinds: frozenset[str] | None,
                    sites: dict[str, set[Pair]]) -> None:
    relation = _constant(rule, head.args[RELATION_POS])
    if relation is None:
        return
    if kinds is not None and relation not in kinds:
        raise RuleError(f"unknown obligation relation '{relation}' (known: {', '.join(sorted(kinds))})", head.span)
    if relation == "rel" and (KERNEL_POS, SITE_POS) not in _justified(rule, head, sites):
        raise RuleError(f"obligation relation 'rel' (the lambda of an assert_tag) at a site that is not an "
                        f"assert_tag: bind the head's kernel and site with {SITE_RELATION}(k, s, ...)", head.span)


# ------------------------------------------------------------------ aliases within one rule body
def _classes(rule: Rule) -> dict[str, str]:
    """Variable -> representative, merging `X = Y`; a constant `X = "c"` makes the representative '"c"'."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for lit in rule.body:
        if isinstance(lit, Constraint) and lit.op == "=":
            a, b = _key(lit.left), _key(lit.right)
            if a is not None and b is not None:
                ra, rb = find(a), find(b)
                if ra != rb:  # a constant stays the representative
                    parent[rb if ra.startswith('"') else ra] = ra if ra.startswith('"') else rb
    return {x: find(x) for x in parent}


def _key(t: Term) -> str | None:
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Sym):
        return '"' + t.value
    return None


def _rep(classes: dict[str, str], t: Term) -> str | None:
    k = _key(t)
    return None if k is None else classes.get(k, k)


def _constant(rule: Rule, t: Term) -> str | None:
    rep = _rep(_classes(rule), t)
    return rep[1:] if rep is not None and rep.startswith('"') else None


# ------------------------------------------------------------------ assert_tag sites
def assert_sites(prog: Program) -> dict[str, set[Pair]]:
    """Relation -> the (kernel, site) position pairs that hold an assert_tag site in every row.

    Greatest fixpoint: every derived relation starts with all pairs and keeps those that each of its
    rules justifies from a positive body atom (sound for Datalog's least model, recursion included)."""
    derived = {h.name for r in prog.rules for h in r.heads}
    out: dict[str, set[Pair]] = {}
    for name, decl in prog.decls.items():
        if name == SITE_RELATION:
            out[name] = {(KERNEL_POS, SITE_POS)}
        elif name in derived:
            n = decl.arity
            out[name] = {(i, j) for i in range(n) for j in range(n) if i != j}
        else:
            out[name] = set()  # facts other than assert_rel hold any statement
    changed = True
    while changed:
        changed = False
        for rule in prog.rules:
            for head in rule.heads:
                keep = out.get(head.name, set()) & _justified(rule, head, out)
                if keep != out.get(head.name, set()):
                    out[head.name] = keep
                    changed = True
    return out


def _justified(rule: Rule, head: Atom, sites: dict[str, set[Pair]]) -> set[Pair]:
    """The head's (kernel, site) pairs that a positive body atom binds to an assert_tag site."""
    classes = _classes(rule)
    bound: set[tuple[str, str]] = set()
    for lit in rule.body:
        if isinstance(lit, Atom) and not lit.negated:
            for i, j in sites.get(lit.name, ()):
                if i < len(lit.args) and j < len(lit.args):
                    a, b = _rep(classes, lit.args[i]), _rep(classes, lit.args[j])
                    if a is not None and b is not None and not a.startswith('"') and not b.startswith('"'):
                        bound.add((a, b))
    out = set()
    for i, hi in enumerate(head.args):
        for j, hj in enumerate(head.args):
            if i != j and (_rep(classes, hi), _rep(classes, hj)) in bound:
                out.add((i, j))
    return out
