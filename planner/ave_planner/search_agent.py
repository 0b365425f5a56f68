"""The built-in search agent: candidates from the fixed edit grammar (`edits.py`), one edit at a
time; what the feedback mode changes is only the order it tries them in.

* `result`, `result+perf`: program order (the grammar's order; the estimate of `result+perf`
  says nothing about correctness, so this agent does not use it);
* `diff`: program order, hill-climbing on the number of differing output elements (a
  candidate that lowers it becomes the kernel the next edits start from);
* `invariant`: the lines of the first finding's fix hint (where a missing barrier or wait
  goes), of its counterexample's store -> load -> use chain and its use site first, then the
  rest; on those lines, the edit kinds that can change what the failing invariant is about first
  (a race: barriers; a tag relation: indices) at every line before the next kind, and index swaps
  first when the two sides' tags are the same components in another order;
* `invariant-site`: the failing invariant's line first, then the rest; kinds by invariant.
In the `invariant` modes the evaluator runs `check` first, so a candidate that still fails is
never run: the pre-screen, counted as one evaluation.
"""
from __future__ import annotations

from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text

from .agent import Edit, Feedback, Proposal, Task
from .edits import KINDS, GrammarEdit, program_order

_INDEX = ("swap_index", "swap_roles", "replace_var", "add_swizzle", "drop_swizzle", "stage_pm", "toggle_variant")
_BOUNDS = ("compare_strict", "const_pm1", "add_offset", "drop_term")
_SYNC = ("insert_sync", "remove_sync", "insert_wait")
KIND_PREFERENCE = {  # invariant id -> the edit kinds tried first at a statement (the rest follow in KINDS order)
    "ave/shared-race": _SYNC, "ave/barrier-divergence": _SYNC,
    "ave/async-copy-wait": ("insert_wait", "const_pm1", "stage_pm", "remove_sync", "insert_sync"),
    "ave/global-bounds": _BOUNDS, "ave/buffer-bounds": _BOUNDS, "ave/masked-flow": _BOUNDS,
    "ave/output-coverage": _BOUNDS + _INDEX,
}


def kind_order(invariant: str | None, permuted_tags: bool = False) -> list[str]:
    first = list(KIND_PREFERENCE.get(invariant or "", _INDEX))
    if permuted_tags:
        first = ["swap_index", "swap_roles"] + [k for k in first if k not in ("swap_index", "swap_roles")]
    return first + [k for k in KINDS if k not in first]


def _permuted(cx: dict) -> bool:
    a, b = (cx.get("lhs") or {}).get("tag"), (cx.get("rhs") or {}).get("tag")
    return bool(a and b and a != b and sorted(map(str, a)) == sorted(map(str, b)))


def prioritise(edits: list[GrammarEdit], mode: str, start: Feedback) -> list[GrammarEdit]:
    """The grammar's edits in the order the mode's feedback on the bug suggests."""
    found = (start.data.get("findings") or [None])[0] if mode in ("invariant", "invariant-site") else None
    if not found:
        return edits
    use = found.get("line")
    lines = list(found.get("fix_lines", [])) + list(found.get("chain_lines", [])) if mode == "invariant" else []
    lines += [use] if use is not None and use not in lines else []
    permuted = mode == "invariant" and _permuted(found.get("counterexample") or {})
    kinds = {k: i for i, k in enumerate(kind_order(found.get("invariant"), permuted))}
    tier = {}
    for line in lines:
        tier.setdefault(line, len(tier))
    # on the tier's lines: kind first (the preferred kinds at every line of the chain), then the line
    return sorted(edits, key=lambda e: (0, kinds[e.kind], tier[e.line]) if e.line in tier else (1, 0, 0))


class SearchAgent:
    name = "search"

    def __init__(self) -> None:
        self.queue: list[GrammarEdit] = []
        self.seen: set[str] = set()

    def start(self, text: str, task: Task, mode: str, feedback: Feedback) -> None:
        self.mode, self.start_feedback = mode, feedback
        self.seen = {printer.module(parse_text(text))}
        self.queue = prioritise(program_order(parse_text(text)), mode, feedback)
        self.best = feedback.data.get("mismatched")
        self.last: Proposal | None = None

    def propose(self, feedback: Feedback | None) -> Proposal | None:
        if self.mode == "diff" and feedback is not None and self.last is not None:
            m = feedback.data.get("mismatched")
            if isinstance(m, int) and isinstance(self.best, int) and 0 < m < self.best:
                self.best = m  # a better kernel to start from: its edits next
                self.queue = program_order(parse_text(self.last.text)) + self.queue
        while self.queue:
            e = self.queue.pop(0)
            text = printer.module(e.module)
            if text in self.seen:
                continue
            self.seen.add(text)
            self.last = Proposal(text, Edit(e.kind, e.line, e.description))
            return self.last
        return None
