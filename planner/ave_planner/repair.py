"""The repair loop: agent -> frozen-spec guard -> evaluation -> feedback, until the first accepted
fix (VERIFIED, and the output matches the reference at two sizes) or the evaluation budget.

The guard runs before any evaluation and costs none: a candidate that changes the kernel's
signature, reference, tags, assumes or assertions, or drops a tagged tensor, is counted as
rejected and the agent is told so. The bug's own evaluation (what starts the repair) counts too.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from ave_decl.lang import ast as A
from ave_decl.lang.errors import AveError
from ave_decl.lang.parser import parse_text
from ave_decl.lang.spec import spec_changes

from .agent import Agent, Edit, Task
from .evaluate import CANDIDATE_PATH, BudgetExhausted, Evaluator
from .feedback import feedback, rejected


@dataclass
class Step:
    index: int
    edit: Edit | None
    outcome: str  # accepted | failed | rejected (guard) | over budget
    calls: list[str]  # the gates asked, in order ("check", "run")
    counted: int  # the evaluations they cost (a call made before in this repair costs none)
    feedback: dict
    note: str = ""


@dataclass
class RepairResult:
    mode: str
    agent: str
    fixed: bool
    evaluations: int  # calls of check and of the reference run, the bug's own evaluation included
    candidates: int  # candidates evaluated (the guard's rejects not included)
    rejected: int  # candidates the frozen-spec guard rejected
    seconds: float  # the calls' seconds (as measured when each was made) plus the agent's own time
    fix: str | None = None  # the accepted kernel
    fix_edit: Edit | None = None
    steps: list[Step] = field(default_factory=list)
    usage: dict = field(default_factory=dict)  # the agent's tokens and cost (LLM agents)

    def to_json(self, steps: bool = True) -> dict:
        d = asdict(self)
        if not steps:
            d.pop("steps")
        return d


class SpecGuard:
    """The frozen-spec guard of one kernel (`ave check --frozen-spec`'s API on ASTs): the original
    is parsed once and each candidate's answer kept by its text, because the modes of one bug
    propose many of the same candidates. A pure function of the two texts, so the memo changes
    no answer. A candidate is parsed under the path `evaluate` checks and runs it under, so the
    front end's parse memo hands them this AST."""

    def __init__(self, original: str) -> None:
        try:
            self.original: A.Module | None = parse_text(original, "original.ave")
        except AveError:
            self.original = None  # a bug that does not parse: no spec to freeze
        self.answers: dict[str, list[str]] = {}

    def changes(self, candidate: str) -> list[str]:
        """The spec changes as one-line errors; none for a candidate that does not parse (its
        evaluation says so, and counts)."""
        if candidate not in self.answers:
            try:
                found = [] if self.original is None else spec_changes(self.original,
                                                                      parse_text(candidate, CANDIDATE_PATH))
                self.answers[candidate] = [c.one_line() for c in found]
            except AveError:
                self.answers[candidate] = []
        return self.answers[candidate]


def repair(text: str, agent: Agent, mode: str, evaluator: Evaluator, task: Task = Task("repair"),
           guard: SpecGuard | None = None) -> RepairResult:
    """Repair `text` with `agent` under feedback `mode` within `evaluator`'s budget (`guard`:
    the frozen-spec guard of `text`, shared by the repairs of one bug)."""
    guard = guard or SpecGuard(text)
    agent_s = 0.0
    res = RepairResult(mode, agent.name, False, 0, 0, 0, 0.0)
    try:
        first = evaluator.evaluate(text, mode)
    except BudgetExhausted:
        return res
    fb = feedback(mode, first)
    a0 = time.perf_counter()
    agent.start(text, task, mode, fb)
    agent_s += time.perf_counter() - a0
    last = None
    while True:
        a0 = time.perf_counter()
        prop = agent.propose(last)
        agent_s += time.perf_counter() - a0
        if prop is None:
            break
        for k, v in prop.usage.items():
            res.usage[k] = res.usage.get(k, 0) + v
        changes = guard.changes(prop.text)
        if changes:
            res.rejected += 1
            last = rejected(mode, changes)
            res.steps.append(Step(len(res.steps) + 1, prop.edit, "rejected", [], 0, last.data, prop.note))
            continue
        before = evaluator.calls
        try:
            ev = evaluator.evaluate(prop.text, mode)
        except BudgetExhausted:
            res.steps.append(Step(len(res.steps) + 1, prop.edit, "over budget", [], evaluator.calls - before, {},
                                  prop.note))
            break
        res.candidates += 1
        last = feedback(mode, ev)
        res.steps.append(Step(len(res.steps) + 1, prop.edit, "accepted" if ev.accepted else "failed",
                              ev.calls, evaluator.calls - before, last.data, prop.note))
        if ev.accepted:
            res.fixed, res.fix, res.fix_edit = True, prop.text, prop.edit
            break
    res.evaluations = evaluator.calls
    res.seconds = evaluator.seconds + agent_s
    return res
