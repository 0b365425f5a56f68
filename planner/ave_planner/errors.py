"""The planner's errors: one line each, `file:line:col: error: ...`, with the exit code of docs/planner.md."""
from __future__ import annotations

EXIT_NO_IMPROVEMENT = 1  # no candidate passed every gate and improved the estimate
EXIT_USAGE = 2
EXIT_KERNEL = 3  # the input kernel does not parse, or is not VERIFIED / correct itself
EXIT_KNOWLEDGE = 4  # a knowledge-base file (or its precondition rules) is invalid


class PlannerError(Exception):
    exit_code = EXIT_USAGE

    def __init__(self, message: str, path: str | None = None, line: int | None = None, col: int | None = None):
        super().__init__(message)
        self.message, self.path, self.line, self.col = message, path, line, col

    def one_line(self) -> str:
        where = self.path or ""
        if self.path and self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        return f"{where}: error: {self.message}" if where else f"error: {self.message}"


class KnowledgeError(PlannerError):
    exit_code = EXIT_KNOWLEDGE


class KernelError(PlannerError):
    exit_code = EXIT_KERNEL
