"""The ids in the derived rows the solver indexes by. A rule file given with `--rules` may add rows
to the core rules' relations as well as emit obligations, and the rules are data: an id that the
kernel does not have is the rules' error (exit 4), found here before any formula is built, so that a
look-up failing later is the checker's own bug and is reported as an internal error."""
from __future__ import annotations

from ..facts.view import KernelView
from ..lang.errors import RuleError

# relation -> the kind of each column after the kernel ("": not an id; a loop or carrier column may
# also hold a statement id below 1 for "none")
DERIVED_IDS: dict[str, tuple[str, ...]] = {
    "reaching_store": ("access", "access", "stmt", "", ""),
    "war_candidate": ("access", "access", "stmt"),
    "async_exposed": ("access", "access", "stmt", "", "stmt", "", "stmt", ""),
    "root": ("access",), "uncertain_load": ("access",),
    "value_has_root": ("value",), "full_flow": ("value",),
    "uncertain_site": ("stmt",), "structural": ("stmt", "", ""), "unchecked": ("stmt", "", ""),
}


def check_derived_ids(view: KernelView, derived: dict[str, list[tuple]]) -> None:
    """Raise a RuleError naming the first derived row (in relation, then row order) whose id is not
    one of the kernel's accesses, values or statements."""
    known = {"access": view.accesses, "value": view.values, "stmt": view.stmts}
    for relation, kinds in DERIVED_IDS.items():
        for row in sorted(derived.get(relation, [])):
            for kind, i in zip(kinds, row[1:]):
                if kind and i not in known[kind] and not (kind == "stmt" and i < 1):
                    raise RuleError(f"the rules derive {relation}{tuple(row[1:])} for kernel '{view.kf.name}', "
                                    f"which has no {kind} {i}: a rule given with --rules adds rows to a relation "
                                    f"of the core rules (docs/writing-invariants.md)")
