"""Engine selection and the process boundary that makes engine timeouts work.

clingo's grounding cannot be interrupted from Python (a SIGALRM surfaces only after `ground()`
returns), so a run with a timeout happens in a forked worker process that is killed on time.
Soufflé is a subprocess already and takes the timeout itself.
"""
from __future__ import annotations

import multiprocessing as mp
import re
import sys
from typing import Protocol

from ..errors import AveError, EngineTimeout, RuleError
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


def _child(engine: ClingoEngine, facts, conn) -> None:
    try:
        conn.send(("ok", engine.run(facts)))
    except AveError as exc:
        conn.send(("error", exc))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never lost
        conn.send(("crash", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_in_worker(engine: ClingoEngine, facts: dict[str, list[tuple]], timeout: float) -> dict[str, list[tuple]]:
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
