"""The process boundary that makes embedded-engine timeouts work.

clingo's grounding cannot be interrupted from Python (a SIGALRM surfaces only after `ground()`
returns), so a run with a timeout happens in a forked worker process that is killed on time.
The worker never outlives the call: it is killed on every way out (result, error, timeout,
KeyboardInterrupt, SIGTERM of ave), and dies with ave if ave is SIGKILLed (children.py).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from typing import Protocol

from ..lang.errors import AveError, EngineTimeout, RuleError
from .children import die_with_parent, sigterm_unwinds, wait_in_slices, wait_limit


class InProcessEngine(Protocol):
    def run(self, facts: dict[str, list[tuple]], timeout: float | None = None) -> dict[str, list[tuple]]: ...


def _child(engine: InProcessEngine, facts, conn, parent: int) -> None:
    die_with_parent(parent)
    try:
        conn.send(("ok", engine.run(facts)))
    except AveError as exc:
        conn.send(("error", exc))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never lost
        conn.send(("crash", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_in_worker(engine: InProcessEngine, facts: dict[str, list[tuple]], timeout: float) -> dict[str, list[tuple]]:
    """Run the embedded engine in a forked process; kill it after `timeout` seconds."""
    limit = wait_limit(timeout)
    with sigterm_unwinds():
        return _run(engine, facts, limit)


def _run(engine: InProcessEngine, facts: dict[str, list[tuple]], timeout: float) -> dict[str, list[tuple]]:
    # fork is fast, but not safe once JAX (multithreaded) is loaded in this process: then spawn
    ctx = mp.get_context("spawn" if "jax" in sys.modules else "fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(engine, facts, child, os.getpid()), daemon=True)
    try:
        proc.start()
        child.close()
        if not wait_in_slices(parent.poll, timeout):
            raise EngineTimeout(f"the embedded Datalog engine did not finish within {timeout:g} s")
        status, payload = parent.recv()
    except EOFError:
        raise RuleError(f"the embedded engine's worker died (exit code {proc.exitcode})", None) from None
    finally:
        if proc.pid is not None:  # started (start() itself can fail)
            if proc.is_alive():
                proc.kill()
            proc.join()
        child.close()
        parent.close()
    if status == "ok":
        return payload
    if status == "error":
        raise payload
    raise RuleError(f"the embedded engine failed: {payload}", None)
