"""What keeps a child process from outliving its parent: SIGTERM turned into an exception for a
block (`sigterm_unwinds`, so `finally` blocks that stop children run) and the kernel asked to kill
a child whose parent dies (`die_with_parent`, Linux PR_SET_PDEATHSIG). Shared by the Datalog
engine's children (datalog/children.py) and the solver's forked helpers (solver/parallel.py)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_PR_SET_PDEATHSIG = 1


class Terminated(BaseException):
    """SIGTERM arrived while a child was running (a BaseException: no `except Exception` swallows it)."""


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises Terminated (main thread only; elsewhere a no-op); on the
    way out the previous handler is restored and the signal re-delivered to it, so the process
    still ends the way its parent asked, after the block's clean-up ran."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None):
        yield
        return

    def _raise(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
        raise Terminated()

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signal.SIGTERM, None)
        else:
            os.kill(os.getpid(), signal.SIGTERM)  # the default action: end the process, as asked
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when `parent` dies (Linux; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
