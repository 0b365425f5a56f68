"""Errors of code generation and of running emitted code (each maps to a documented exit code)."""
from __future__ import annotations

from ..lang.errors import AveError, ExitCode


class CodegenError(AveError):
    """A kernel construct the code generator cannot lower for a target (at its `file:line:col`),
    or a kernel the target does not apply to (a wave64 kernel for nvptx)."""

    exit_code = ExitCode.CODEGEN
    kind = "codegen"


class ToolchainError(AveError):
    """A tool a stage needs is missing or failed (ptxas not installed, nvdisasm refused a cubin)."""

    exit_code = ExitCode.USAGE
    kind = "toolchain"


class NoDevice(AveError):
    """The target's device is not present here (no GPU, no driver, a driver too old)."""

    exit_code = ExitCode.USAGE
    kind = "device"


class LaunchFailed(AveError):
    """The device ran the kernel and reported a fault (an illegal address, a trap): exit 1, as a
    runtime error of `ave simulate` is."""

    exit_code = ExitCode.VIOLATION
    kind = "launch"
