"""One kernel's obligations discharged by several processes: this one and forked helpers.

Why: most of a big kernel's check is Python building and slicing queries (production attention:
~3 s, of which Z3 solves well under half), so a second core halves what one check waits for,
where a GIL-bound thread would not. The obligations of one rule and relation whose proofs are
shared (families, slices) form one work unit, any other obligation a unit of its own; units go
heaviest first to whichever process asks next (a shared counter), and every finding lands in its
obligation's place, so the report is the same whatever process decided what: names restart per
obligation, counterexamples are canonical models (canonical_model.py) and budgets count solver
units, not time. Violation sets are counted last, from their queries' text (violation_set.py),
spread over the processes the same way.

A helper that dies or sends what cannot be read only costs time: this process decides the units
it did not report. Helpers are forked, which is unsafe once a multithreaded library (JAX) is
loaded, another thread runs, or off Linux: there, and with one job, everything runs here.
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

from ..report.model import Finding
from . import proof_memo
from .families import RELATIONS as FAMILY_RELATIONS
from .violation_set import SetQuery, violating_set

# The cost of one obligation of a relation, in rough milliseconds (measured on the examples,
# docs/performance.md): only the order units are handed out in depends on it, never a verdict.
RELATION_WEIGHT = {
    "k_pairing": 80, "broadcast": 90, "rel": 60, "stored_tag": 60, "async_exposed": 60, "k_distinct": 45,
    "reduce_uniform": 40, "stat_eq": 20, "bank_conflicts": 12,
}
OTHER_WEIGHT = 3
# Helpers are forked at once when the estimated work is at least FORK_AT_ONCE, else only once
# this process has decided obligations for FORK_AFTER_S seconds with units left: a fork and its
# hand-back cost 3-20 ms, and most small kernels are done by then. The estimate is rough
# (flash_attention_st: 846, 0.19 s alone, 0.21 s with a helper), but forking late loses more
# where one obligation is most of the work (helpers/gemm_helpers_b_offset: K pairing 0.16 s,
# then its assertion 0.5 s: 0.68 s with a helper forked after the first, 0.44 s from the start).
# Only speed depends on them, never a report.
FORK_AT_ONCE = 300
FORK_AFTER_S = 0.1

# relations whose obligations share work: families (families.py), and slices proved once for
# every obligation of the rule (production attention's statistic broadcasts: 9 obligations, 5,193
# queries, 1,296 distinct slices); split across processes, each would build and prove them again
SHARING = FAMILY_RELATIONS | {"broadcast", "rel", "eq", "stat_eq", "reduce_uniform", "mask_rel"}

Discharge = Callable[[tuple], Finding]  # one obligation (site, inv, relation, lhs, rhs) -> its finding


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether forking a helper is safe here: Linux (macOS forks badly once system frameworks are
    loaded), one thread (a lock another thread holds stays held in the helper forever), and no
    JAX in this process (its threads do not survive a fork)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and "jax" not in sys.modules
            and threading.active_count() == 1)


def work_units(obligations: Sequence[tuple]) -> list[list[int]]:
    """Obligation positions in units, in first-occurrence order within a unit, units heaviest
    first (ties: the first to occur first). A unit is every obligation of one rule and relation
    that shares proofs across obligations (SHARING), else one obligation: units of accesses
    (races, async copies, bounds, bank conflicts) share nothing, and smaller ones balance better
    (pipelines/gemm_pipelined3_wait2's four async-copy violations: 0.57 -> 0.49 s with two jobs)."""
    units: dict[tuple, list[int]] = {}
    for n, (_site, inv, relation, _lhs, _rhs) in enumerate(obligations):
        units.setdefault((inv, relation) if relation in SHARING else (inv, relation, n), []).append(n)
    weighted = [(-estimated_work(obligations, unit), unit[0], unit) for unit in units.values()]
    return [unit for _w, _first, unit in sorted(weighted)]


def estimated_work(obligations: Sequence[tuple], positions: Sequence[int]) -> int:
    return sum(RELATION_WEIGHT.get(obligations[n][2], OTHER_WEIGHT) for n in positions)


def discharge_all(obligations: Sequence[tuple], discharge: Discharge, jobs: int,
                  set_queries: Callable[[], dict[tuple, SetQuery]]) -> list[Finding]:
    """Each obligation's finding, in the obligations' order, decided by this process and up to
    `jobs - 1` forked helpers (at once when the estimated work is FORK_AT_ONCE, else once this
    process has worked FORK_AFTER_S with units left). `discharge` leaves the violation sets out,
    and `set_queries()` gives (and forgets) the queries it left them to, by obligation; those are
    counted afterwards, again spread over the processes (one violated obligation's set can take
    most of a kernel's check: production attention's PV-layout variant has eight of ~0.4 s)."""
    units = work_units(obligations)
    positions = {o: n for n, o in enumerate(obligations)}

    def decide(u: int) -> dict[int, Finding]:
        return {n: discharge(obligations[n]) for n in units[u]}

    def left_to_count() -> dict[int, SetQuery]:
        return {positions[o]: q for o, q in set_queries().items()}

    soon = estimated_work(obligations, range(len(obligations))) >= FORK_AT_ONCE
    found, deferred = _spread(len(units), decide, jobs, 0 if soon else FORK_AFTER_S, left_to_count)
    for u in range(len(units)):  # what no helper reported is decided here
        for n in units[u]:
            if n not in found:
                found[n] = discharge(obligations[n])
    deferred.update(left_to_count())
    order = sorted(deferred)
    counted, _none = _spread(len(order), lambda i: {i: violating_set(deferred[order[i]])}, jobs, 0, dict)
    for i, n in enumerate(order):
        found[n].violation_set = counted[i] if i in counted else violating_set(deferred[n])
    return [found[n] for n in range(len(obligations))]


def _spread(tasks: int, run: Callable[[int], dict], jobs: int, fork_after_s: float,
            extra: Callable[[], dict]) -> tuple[dict, dict]:
    """The results of tasks 0..tasks-1 (`run(i)`: a dict of results), run here and by up to
    `jobs - 1` helpers forked once this process has worked `fork_after_s` with tasks left,
    each taking the next task from a shared counter; and what `extra()` gave in each helper
    after its last task. A task a dead helper took is missing from the results."""
    counter = mp.get_context("fork").RawValue("l", 0)  # the next task, in shared memory
    lock = mp.get_context("fork").Lock()
    results: dict = {}
    extras: dict = {}
    helpers: list[tuple[int, int]] = []
    fork_at = time.perf_counter() + fork_after_s
    done = False

    def next_task() -> int:
        with lock:
            n = counter.value
            counter.value = n + 1
        return n

    def fork_when_due() -> None:
        nonlocal helpers
        left = tasks - counter.value  # read without the lock: only speed depends on it
        if not helpers and jobs > 1 and left > 1 and time.perf_counter() >= fork_at and can_fork():
            helpers = [_fork_helper(next_task, tasks, run, extra) for _ in range(min(jobs, left) - 1)]

    try:
        fork_when_due()
        while (i := next_task()) < tasks:
            results.update(run(i))
            fork_when_due()
        for _pid, fd in helpers:
            got, more = _collect(fd)
            results.update(got)
            extras.update(more)
        done = True
    finally:  # an error or Ctrl-C here: the helpers are stopped, not waited for
        for pid, fd in helpers:
            _reap(pid, fd, kill=not done)
    return results, extras


def _fork_helper(next_task: Callable[[], int], tasks: int, run: Callable[[int], dict],
                 extra: Callable[[], dict]) -> tuple[int, int]:
    """A forked helper running tasks until none is left; it writes their results, `extra()` and
    the proofs it learned (for this process's proof memo) to a pipe and exits."""
    read_end, write_end = os.pipe()
    gc.freeze()  # the helper's collections never walk (nor write to) what it inherits
    try:
        pid = os.fork()
    finally:
        gc.unfreeze()
    if pid:
        os.close(write_end)
        return pid, read_end
    # the helper: never returns into the caller's code
    code = 1
    try:
        os.close(read_end)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent reports it, the helper just ends
        proof_memo.MEMO.start_journal()
        results: dict = {}
        while (i := next_task()) < tasks:
            results.update(run(i))
        payload = pickle.dumps(("ok", results, extra(), proof_memo.MEMO.journal()), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            with os.fdopen(write_end, "wb", closefd=False) as pipe:
                pipe.write(pickle.dumps(("raise", _picklable(exc))))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _collect(fd: int) -> tuple[dict, dict]:
    """A helper's results and extras (its learned proofs go into this process's memo); nothing
    if it died or sent what cannot be read. An error it raised is raised here, as if met here."""
    with os.fdopen(fd, "rb", closefd=False) as pipe:
        data = pipe.read()
    try:
        message = pickle.loads(data)  # written by a helper forked from this process: not untrusted input
    except Exception:  # noqa: BLE001 - a helper killed mid-write: its tasks are run here
        return {}, {}
    if message[0] == "raise":
        raise message[1]
    _status, results, extras, learned = message
    proof_memo.MEMO.learn(learned)
    return results, extras


def _reap(pid: int, fd: int, kill: bool) -> None:
    """Close the helper's pipe and wait for it to end (after it sent everything, it only exits),
    killing it first when `kill`."""
    try:
        os.close(fd)
    except OSError:
        pass
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
