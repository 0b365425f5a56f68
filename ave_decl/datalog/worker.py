"""The process boundary that makes embedded-engine timeouts work.

clingo's grounding cannot be interrupted from Python (a SIGALRM surfaces only after `ground()`
returns), so a run with a timeout happens in a forked worker process that is killed on time.
"""
from __future__ import annotations

import multiprocessing as mp
import sys
from typing import Protocol

from ..lang.errors import AveError, EngineTimeout, RuleError


class InProcessEngine(Protocol):
    def run(self, facts: dict[str, list[tuple]], timeout: float | None = None) -> dict[str, list[tuple]]: ...


def _child(engine: InProcessEngine, facts, conn) -> None:
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
    # fork is fast, but not safe once JAX (multithreaded) is loaded in this process: then spawn
    ctx = mp.get_context("spawn" if "jax" in sys.modules else "fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(engine, facts, child), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise EngineTimeout(f"the embedded Datalog engine did not finish within {timeout} s")
        status, payload = parent.recv()
    except EOFError:
        raise RuleError(f"the embedded engine's worker died (exit code {proc.exitcode})", None) from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if status == "ok":
        return payload
    if status == "error":
        raise payload
    raise RuleError(f"the embedded engine failed: {payload}", None)
