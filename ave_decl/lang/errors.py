"""Error classes and the exit codes they map to (same in every output mode)."""
from __future__ import annotations

import re
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: source.py raises these errors, so errors.py must not import it
    from .source import SourceFile, Span


# A message quotes source text (names, literals, tokens): a 100 KB literal must not be echoed whole.
# Any run of non-blank characters longer than _MAX_WORD, and a message longer than _MAX_MESSAGE, is
# cut and the cut marked with `…` (docs/language.md, "Limits"); the location is never cut.
_MAX_WORD = 160  # longer than any path a message names
_MAX_MESSAGE = 1000
_LONG_WORD = re.compile(r"\S{%d,}" % (_MAX_WORD + 1))


def shorten(message: str) -> str:
    """`message` with over-long quoted source text cut (see _MAX_WORD, _MAX_MESSAGE)."""
    message = _LONG_WORD.sub(lambda m: f"{m.group(0)[:60]}… ({len(m.group(0))} characters)", message)
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 120] + " … " + message[-100:]
    return message


class ExitCode(IntEnum):
    CLEAN = 0
    VIOLATION = 1
    USAGE = 2
    FRONT_END = 3
    RULES = 4
    INCONCLUSIVE = 5
    CODEGEN = 6  # a construct the code generator cannot lower, or a target that does not apply
    INTERNAL = 70
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT


class AveError(Exception):
    """A diagnostic with a location; `kind` names the stage that raised it."""

    exit_code: ExitCode = ExitCode.INTERNAL
    kind = "internal"

    def __init__(self, message: str, span: Span | None = None, notes: tuple[str, ...] = ()):
        message = shorten(message)
        super().__init__(message)
        self.message = message
        self.span = span
        self.notes = notes

    def one_line(self) -> str:
        if not self.span:
            return f"error: {self.message}"
        return f"{self.span}: error: {self.message}{self.span.call_chain()}"

    def render(self, source: SourceFile | None = None) -> str:
        parts = [self.one_line()]
        if source is not None and self.span is not None and source.path == self.span.path:
            snippet = source.snippet(self.span)
            if snippet:
                parts.append(snippet)
        parts.extend(f"  = note: {n}" for n in self.notes)
        return "\n".join(parts)


class FrontEndError(AveError):
    """Bad kernel source: syntax, names, arity, rank, types."""

    exit_code = ExitCode.FRONT_END
    kind = "front-end"


class RuleError(AveError):
    """Bad Datalog rule file, or a rule the engine cannot run."""

    exit_code = ExitCode.RULES
    kind = "rules"


class UsageError(AveError):
    exit_code = ExitCode.USAGE
    kind = "usage"


class EngineUnavailable(AveError):
    """The requested Datalog engine cannot run here (e.g. no 32-bit souffle)."""

    exit_code = ExitCode.USAGE
    kind = "usage"


class EngineTimeout(AveError):
    """The Datalog fixpoint did not finish in time: every kernel of the run is UNKNOWN."""

    exit_code = ExitCode.INCONCLUSIVE
    kind = "timeout"
