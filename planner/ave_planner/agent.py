"""The agent interface of repair loops (issue 15): an agent reads the kernel, the task and the
feedback on its previous candidate, and proposes the next candidate.

The same interface serves the built-in search agent (`search_agent.py`) and the LLM agent
(`llm_agent.py`), so the guidance experiment (bench/guidance.py) compares feedback, not agents.
What an agent may read is only the `Feedback` record of its mode (`feedback.py`), never the
evaluation itself: the mode is the experiment's variable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

MODES = ("result", "result+perf", "diff", "invariant", "invariant-site")


@dataclass(frozen=True)
class Task:
    """What the agent is asked: repair the kernel (its output or its proof is wrong), or apply
    a technique (the planner's episodes)."""

    kind: str  # "repair" | "technique"
    description: str = "The kernel is wrong. Propose a corrected kernel."
    technique: str | None = None


@dataclass(frozen=True)
class Feedback:
    """What the agent is told about one candidate: a JSON-able dict whose keys depend on the mode."""

    mode: str
    data: dict

    def to_json(self) -> dict:
        return {"mode": self.mode, **self.data}


@dataclass(frozen=True)
class Edit:
    """Where a candidate differs from the kernel it was made from (for the fix-location analysis):
    the grammar's edit kind and the 1-based line of the statement it edits."""

    kind: str
    line: int
    description: str = ""


@dataclass
class Proposal:
    text: str
    edit: Edit | None = None  # None: the agent does not say (an LLM's whole kernel)
    note: str = ""  # the agent's own words (an LLM's reasoning), for transcripts
    usage: dict = field(default_factory=dict)  # tokens and cost of the proposal (LLM agents)


class Agent(Protocol):
    name: str

    def start(self, text: str, task: Task, mode: str, feedback: Feedback) -> None:
        """A new repair of `text`; `feedback` is the evaluation of `text` itself in `mode`."""

    def propose(self, feedback: Feedback | None) -> Proposal | None:
        """The next candidate (feedback: of the previous one; None before the first); None when
        the agent has nothing left to propose."""
