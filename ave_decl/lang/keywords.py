"""The keyword arguments of the reductions, lane exchanges and elementwise functions, checked on
the AST. Why here: `ave check` (the lowering) and `ave simulate` (the simulator, which never imports
the lowering) must refuse the same misplaced or unknown keyword with the same located error
(exit 3) — a keyword where none is read would otherwise be silently ignored by one of them
(docs/language.md, "Reductions" and "Butterfly reductions")."""
from __future__ import annotations

from . import ast as A
from .depth import walk
from .errors import FrontEndError
from .resolve import ELEMENTWISE, LANE_EXCHANGE, SLOT_REDUCTIONS, butterfly_operand

# the calls that take keywords -> the keywords each reads
KEYWORDS: dict[str, tuple[str, ...]] = {"lane_max": ("drops",), "lane_sum": ("drops",), "shuffle_xor": ("drops",),
                                        **{name: ("axis", "drops") for name in SLOT_REDUCTIONS}}
# the calls that read none
NO_KEYWORDS = (ELEMENTWISE | set(LANE_EXCHANGE) | {"min", "max"}) - set(KEYWORDS)


def check_keywords(kernel: A.Kernel) -> None:
    """Raise a FrontEndError at the first keyword (in source order) that its call does not read;
    `shuffle_xor(..., drops=k)` only as the partner of a butterfly step `fmax(x, shuffle_xor(x, m,
    drops=k))` (fmin, +)."""
    partners: set[int] = set()  # ids of the shuffle_xor nodes of butterfly steps
    for node in walk(kernel):
        if isinstance(node, A.BinOp):
            _note_butterfly(node.op, (node.left, node.right), partners)
        if not isinstance(node, A.Call) or node.func_name is None:
            continue
        name = node.func_name
        if name in NO_KEYWORDS:
            if node.kwargs:
                hint = " (a butterfly step says drops= on its shuffle_xor)" if name in ("fmax", "fmin") else ""
                raise FrontEndError(f"{name}() takes no keyword arguments{hint}", node.kwargs[0].span)
            _note_butterfly(name, node.args, partners)
        elif name in KEYWORDS:
            _known_keywords(node, name)
            drops = node.kwarg("drops")
            if name == "shuffle_xor" and drops is not None and id(node) not in partners:
                raise FrontEndError("shuffle_xor(..., drops=k) names the tag component a butterfly step reduces "
                                    "over: only as the partner in fmax(x, shuffle_xor(x, m, drops=k)) (fmin, +)",
                                    drops.span)


def _known_keywords(call: A.Call, name: str) -> None:
    for kw in call.kwargs:
        if kw.name not in KEYWORDS[name]:
            allowed = " and ".join(f"{k}=" for k in KEYWORDS[name])
            raise FrontEndError(f"{name}() has no keyword '{kw.name}' (it takes {allowed})", kw.span)


def _note_butterfly(op: str, nodes: tuple, partners: set[int]) -> None:
    """A step's shuffle_xor (seen after the step in source order) may say `drops=`."""
    pos = butterfly_operand(op, tuple(nodes))
    if pos is not None:
        partners.add(id(nodes[1 - pos]))
