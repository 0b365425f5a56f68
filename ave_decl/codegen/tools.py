"""External tools a backend runs (ptxas, nvdisasm, ld.lld): bounded in time, their failure one
located-free line (`ToolchainError`, exit 2) with the tool's first message."""
from __future__ import annotations

import subprocess

from .errors import ToolchainError

TOOL_TIMEOUT_S = 300.0


def run_tool(cmd: list[str], what: str, timeout_s: float = TOOL_TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"{what} did not finish in {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise ToolchainError(f"{what} could not start: {exc}") from exc
    if done.returncode != 0:
        first = next((line for line in (done.stderr or done.stdout).splitlines() if line.strip()), "no message")
        raise ToolchainError(f"{what} failed (exit {done.returncode}): {first.strip()}")
    return done
