"""Engine selection, and the engine-independent classes of rule errors.

clingo's grounding cannot be interrupted from Python (a SIGALRM surfaces only after `ground()`
returns), so a run with a timeout happens in a worker process that is killed on time (worker.py).
Soufflé is a subprocess already and takes the timeout itself.
"""
from __future__ import annotations

import re
from typing import Protocol

from ..lang.errors import AveError, RuleError
from .clingo_engine import ClingoEngine
from .program import Program
from .souffle_engine import SouffleEngine

ENGINES = ("embedded", "souffle")


class Engine(Protocol):
    name: str

    def run(self, facts: dict[str, list[tuple]], timeout: float | None = None) -> dict[str, list[tuple]]: ...


def make_engine(name: str, prog: Program) -> Engine:
    if name == "embedded":
        return ClingoEngine(prog)
    if name == "souffle":
        return SouffleEngine(prog)
    raise RuleError(f"unknown engine {name!r}", None)


# Error classes shared by both engines' messages, so a differential test can compare failures.
_CLASSES = [
    ("syntax", r"syntax error"),
    ("undeclared", r"is not declared|Undefined relation"),
    ("arity", r"attributes, used with|Mismatching arity|[Aa]mbiguous record"),
    ("groundedness", r"not grounded|Ungrounded variable|ungrounded"),
    ("stratification", r"unable to stratify|Unable to stratify"),
    ("type", r"used as both|value where .* expects|[Uu]nable to deduce type|type mismatch|Type mismatch|subtype"),
    ("runtime", r"Floating-point arithmetic exception|wrong string provided|runtime error"),
    ("profile", r"outside the portable|does not fit in 32 bits|only #include|by zero$"),
]


def error_class(exc: AveError) -> str:
    """A coarse, engine-independent class for a rule error ("other" when none matches)."""
    for name, pattern in _CLASSES:
        if re.search(pattern, exc.message):
            return name
    return "other"
