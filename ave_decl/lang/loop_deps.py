"""Which loop variables a kernel's names depend on, directly or through local assignments: what
makes a subview "moving" (its offset varies with a loop it is declared in). The verifier decides
it on the lowered offset (a `loop:` symbol in it: facts/lower_instrs.py `_subview_offset`, relation
`alias_moving`); the simulator, which keeps values and no expressions, decides it here from the
AST, so a fixed view at a named constant or size (`OFF = 64`, `N // 2`) is fixed in both."""
from __future__ import annotations

from . import ast as A
from .depth import walk


def _names(e: A.Expr) -> set[str]:
    """The names an expression reads (not inside lambdas: their names are their parameters)."""
    return {n.id for n in walk(e, into_lambdas=False) if isinstance(n, A.Name)}


def loop_dependence(kernel: A.Kernel) -> dict[str, frozenset[str]]:
    """For every name the kernel binds, the loop variables its value may depend on: a loop
    variable depends on itself; an assigned name on what any of its assignments reads (a fixpoint,
    so a chain `p = it // 128; q = p % 2` is followed, whatever the order of the statements)."""
    deps: dict[str, set[str]] = {}
    reads: dict[str, set[str]] = {}
    for n in (x for s in kernel.body for x in walk(s, into_lambdas=False)):
        if isinstance(n, A.For):
            deps.setdefault(n.var, set()).add(n.var)
        elif isinstance(n, (A.Assign, A.AugAssign)):
            targets = n.target.elts if isinstance(n.target, A.Tuple) else (n.target,)
            for t in targets:
                if isinstance(t, A.Name):
                    reads.setdefault(t.id, set()).update(_names(n.value))
    changed = True
    while changed:
        changed = False
        for name, used in reads.items():
            new = set().union(*(deps.get(u, ()) for u in used)) - deps.get(name, set())
            if new:
                deps.setdefault(name, set()).update(new)
                changed = True
    return {name: frozenset(v) for name, v in deps.items()}


def moves_with(e: A.Expr, deps: dict[str, frozenset[str]], loops) -> bool:
    """Whether expression `e` depends on one of `loops` (the variables of the enclosing loops)."""
    return any(deps.get(n, frozenset()) & set(loops) for n in _names(e))
