"""`drops=k` against the rank of the tag it drops from. The front end bounds k by the largest tag
(lowering, MAX_TAG), but the rank of a reduction's operand is the rank of the tags that flow into
it, known only after the fixpoint. A k outside that rank is a bad kernel, not an open question:
refused here with a located error (exit 3) instead of an UNKNOWN that no counterexample explains
(docs/language.md, "Reductions")."""
from __future__ import annotations

from ..facts.view import KernelView
from ..lang.errors import FrontEndError
from .chains import Expander
from .smt import Encoder


def check_drops_ranks(view: KernelView, enc: Encoder, expander: Expander) -> None:
    """Raise a FrontEndError at the first reduction (or butterfly step) whose stated `drops=k` names
    no component of a full tag its operand carries on some provenance path. Statistics are skipped:
    a reduction of a statistic keeps the component it dropped, and `drops=` on it changes nothing."""
    for vid, drops in sorted(expander.drops.items(), key=lambda item: view.values[item[0]][1]):
        if drops == -1:  # the default: every tag has a last component
            continue
        stmt = view.values[vid][1]
        inst = enc.new_instance(stmt, "drops")
        if vid in expander.butterfly:
            operand = expander.butterfly[vid][0]
        else:
            (operand,) = view.value_args[vid]
            if vid in expander.slot_reduce:
                inst, _cons = expander.reduced_slot(inst, vid)
        for alt in expander.value(operand, inst):
            rank = len(alt.tag or ())
            if alt.stat or alt.unknown or not alt.tag or -rank <= drops < rank:
                continue
            raise FrontEndError(f"drops={drops} names no component of the tag this reduction drops from: its operand "
                                f"is tagged {alt.tag_name} with {rank} component{'s' if rank > 1 else ''} "
                                f"(drops= takes {-rank} to {rank - 1})", view.span(stmt))
