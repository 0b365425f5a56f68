"""Child processes that never outlive the run that started them (the Soufflé subprocess, the
embedded engine's worker).

Every exit path is covered: a normal return, an error, a timeout and KeyboardInterrupt unwind
through `finally` blocks that kill the child; SIGTERM is turned into an exception for the child's
lifetime (`sigterm_unwinds`) so the same blocks run, and then re-delivered; a SIGKILL of ave
cannot be caught, so the child asks the kernel to kill it when its parent dies (Linux
PR_SET_PDEATHSIG). The Soufflé subprocess also runs in its own process group, which is killed
whole, so a grandchild it forks cannot survive it either.
"""
from __future__ import annotations

import ctypes
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..lang.errors import UsageError
from ..lang.lifetime import _PR_SET_PDEATHSIG, Terminated, die_with_parent, sigterm_unwinds  # noqa: F401 - used here and re-exported

MAX_WAIT_S = 1e6  # a longer limit (inf, 1e308) waits this long: the OS's waits overflow past ~2**31 ms


SIGNAL_POLL_S = 0.25  # waits wake this often, so a signal another thread received is acted on


def wait_in_slices(wait, timeout: float) -> bool:
    """Call `wait(seconds)` (True when done) in slices of SIGNAL_POLL_S until done or `timeout`.

    A SIGINT/SIGTERM can be delivered to any thread of the process (JAX, Z3 and clingo start
    threads); Python runs its handler, and raises KeyboardInterrupt, only when the main thread
    next executes bytecode. One long blocking wait would hold Ctrl-C back until the engine's time
    limit (600 s by default); waking up every slice bounds that delay."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if wait(min(remaining, SIGNAL_POLL_S)):
            return True


def wait_limit(timeout: float) -> float:
    """A time limit the OS can wait for: nan or <= 0 is a usage error; above MAX_WAIT_S, MAX_WAIT_S."""
    if math.isnan(timeout) or timeout <= 0:
        raise UsageError(f"a time limit must be a positive number of seconds, not {timeout}")
    return min(timeout, MAX_WAIT_S)


def _preexec(parent: int):
    """The child-side set-up of a subprocess: built in the parent, so the child only calls into libc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return setup


def kill_group(pgid: int) -> None:
    """SIGKILL every process of a process group (gone already: nothing to do)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str  # decoded as UTF-8 with replacement: a broken binary's bytes never raise
    stderr: str


class Expired(Exception):
    """The command ran past its time limit (it has been killed, with its whole group)."""


def run_group(cmd: Sequence[str], timeout: float, cwd: str | None = None) -> Finished:
    """Run `cmd` in a new session (its own process group), without a shell; kill the whole group
    on every way out of this call. Raises Expired past `timeout` seconds, OSError if it cannot start."""
    timeout = wait_limit(timeout)
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, start_new_session=True, preexec_fn=_preexec(os.getpid()))
    result: list[tuple[bytes, bytes]] = []

    def done(seconds: float) -> bool:
        try:  # retrying communicate() after its TimeoutExpired loses no output (subprocess docs)
            result.append(proc.communicate(timeout=seconds))
            return True
        except subprocess.TimeoutExpired:
            return False

    try:
        if not wait_in_slices(done, timeout):
            raise Expired()
        out, err = result[0]
    finally:
        kill_group(proc.pid)  # its pid is its group id (start_new_session); stragglers die too
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
    return Finished(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
