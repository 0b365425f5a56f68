"""One kernel's obligations discharged by several processes: this one and forked helpers.

Why: most of a big kernel's check is Python building and slicing queries (production attention:
~3 s, of which Z3 solves well under half), so a second core halves what one check waits for,
where a GIL-bound thread would not. The obligations of one rule and relation whose proofs are
shared (families, slices) form one work unit, any other obligation a unit of its own; units go
heaviest first to whichever process asks next (a shared counter), and every finding lands in its
obligation's place, so the report is the same whatever process decided what: names restart per
obligation, counterexamples are canonical models (canonical_model.py) and budgets count solver
units, not time. Violation sets are counted from their queries' text (violation_set.py): by a
helper forked as soon as this process finds one while a core is free (`_SetsAhead`), else last,
spread over the processes the same way.

A helper that dies or sends what cannot be read only costs time: this process decides the units
it did not report. An obligation that raises, here or in a helper, makes the caller decide them
all again in one process, in order, so the error is the one a single process meets, where it
meets it. Helpers die with this process (SIGKILL included), SIGTERM and Ctrl-C stop them, and a
fork that fails leaves the work here. The units are handed out through a pipe filled with their
numbers before any fork (a read of one number is atomic, and a process that dies holds nothing
the others wait for). Forking is unsafe once a multithreaded library (JAX) is loaded or another
thread runs, and unavailable off Linux: there, and with one job, everything runs here. (Z3's
timer threads and OpenBLAS's end themselves before a fork, in their pthread_atfork handlers.)
"""
from __future__ import annotations

import fcntl
import gc
import math
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..lang.lifetime import die_with_parent, sigterm_unwinds
from ..report.model import Finding
from . import proof_memo
from .families import DISJUNCTIVE
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

# relations whose obligations share work: families and disjunctions (families.py), and slices proved once for
# every obligation of the rule (production attention's statistic broadcasts: 9 obligations, 5,193
# queries, 1,296 distinct slices); split across processes, each would build and prove them again
SHARING = FAMILY_RELATIONS | DISJUNCTIVE | {"broadcast", "rel", "eq", "stat_eq", "reduce_uniform", "mask_rel"}

F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)  # Linux's fcntl, named in Python 3.10+

Discharge = Callable[[tuple], Finding]  # one obligation (site, inv, relation, lhs, rhs) -> its finding


def default_jobs() -> int:
    """The cores this process may use: its CPU affinity, bounded by a cgroup CPU quota (a
    container given 2 CPUs of a 64-core host)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cores, quota) if quota else cores)


def _cgroup_cpus() -> int | None:
    """The CPUs a cgroup v2 quota allows (`cpu.max`: "<quota> <period>", or "max"), rounded up."""
    try:
        fields = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if len(fields) == 2 and fields[0] != "max":
            return max(1, math.ceil(int(fields[0]) / int(fields[1])))
    except (OSError, ValueError, ZeroDivisionError):
        pass
    return None


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


def forks_at_once(obligations: Sequence[tuple]) -> bool:
    """Whether `discharge_all` forks its helpers before deciding anything (else after FORK_AFTER_S)."""
    return estimated_work(obligations, range(len(obligations))) >= FORK_AT_ONCE


def estimated_work(obligations: Sequence[tuple], positions: Sequence[int]) -> int:
    return sum(RELATION_WEIGHT.get(obligations[n][2], OTHER_WEIGHT) for n in positions)


def discharge_all(obligations: Sequence[tuple], discharge: Discharge, jobs: int,
                  set_queries: Callable[[], dict[tuple, SetQuery]]) -> list[Finding] | None:
    """Each obligation's finding, in the obligations' order, decided by this process and up to
    `jobs - 1` forked helpers (no more processes than `default_jobs`; at once when the estimated
    work is FORK_AT_ONCE, else once this process has worked FORK_AFTER_S with units left).
    `discharge` leaves the violation sets out, and `set_queries()` gives (and forgets) the queries
    it left them to, by obligation; those are counted afterwards, again spread over the processes
    (one violated obligation's set can take most of a kernel's check: production attention's
    PV-layout variant has eight). None when an obligation raised, here or in a helper: the caller
    decides them all in one process instead (see the module's docstring)."""
    jobs = min(jobs, default_jobs())
    units = work_units(obligations)
    positions = {o: n for n, o in enumerate(obligations)}
    ahead = _SetsAhead(jobs)
    waiting: dict[int, SetQuery] = {}  # this process's set queries not handed to a helper at once

    def decide(u: int) -> dict[int, Finding]:
        out = {n: discharge(obligations[n]) for n in units[u]}
        if ahead.here():  # not in a helper: its sets go back with its findings
            left = ahead.start({**waiting, **left_to_count()})
            waiting.clear()
            waiting.update(left)
        return out

    def left_to_count() -> dict[int, SetQuery]:
        return {positions[o]: q for o, q in set_queries().items()}

    soon = forks_at_once(obligations)
    try:
        found, deferred = _spread(len(units), decide, jobs, 0 if soon else FORK_AFTER_S, left_to_count, ahead)
        for u in range(len(units)):  # what no helper reported is decided here
            for n in units[u]:
                if n not in found:
                    found[n] = discharge(obligations[n])
        deferred.update(waiting)
        deferred.update(left_to_count())
        order = sorted(deferred)
        counted, _none = _spread(len(order), lambda i: {i: violating_set(deferred[order[i]])}, jobs, 0, dict, ahead)
        early = ahead.collect()
    except Exception:  # noqa: BLE001 - decided again in one process, which raises it as -j1 does
        return None
    finally:
        ahead.stop()
    for i, n in enumerate(order):
        found[n].violation_set = counted[i] if i in counted else violating_set(deferred[n])
    for n, query in ahead.started.items():
        found[n].violation_set = early[n] if n in early else violating_set(query)
    return [found[n] for n in range(len(obligations))]


class _SetsAhead:
    """Violation sets counted by helpers forked as soon as this process leaves them, while it
    goes on deciding obligations, wherever a core is free: no helper forked to decide
    obligations yet, or those forked have handed in their results (no units were left). Why: a
    small kernel's obligations are decided here alone (helpers are forked late, if at all:
    FORK_AFTER_S), and its sets were counted after all of them (gemm_lds_mfma_transposed: its
    one set, 90 ms, after 140 ms of obligations); where a helper took the last units early, a
    core idled while this process finished its own. A helper that dies costs only time (the set
    is counted here), one that raises is reported as such."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._home = os.getpid()
        self.started: dict[int, SetQuery] = {}  # obligation position -> its set query, given to a helper
        self._helpers: list[tuple[int, int]] = []  # (pid, pipe)
        self.deciding: list[tuple[int, int]] = []  # `_spread`'s helpers deciding obligations now
        self._ended: set[tuple[int, int]] = set()  # helpers (pid, pipe) reaped here; their pipes keep their results
        self._collected = False

    def here(self) -> bool:
        return os.getpid() == self._home

    def watch(self, deciding: list[tuple[int, int]]) -> None:
        """`_spread`'s helpers deciding obligations (none: they were reaped, and their pids and
        pipes may be another's now)."""
        self._ended.difference_update(self.deciding)
        self.deciding = deciding

    def ended(self, helper: tuple[int, int]) -> bool:
        """Whether the helper (pid, pipe) has ended, reaped here: nobody may signal its pid again."""
        if helper not in self._ended:
            try:
                if os.waitpid(helper[0], os.WNOHANG)[0] != helper[0]:
                    return False
            except ChildProcessError:
                pass
            self._ended.add(helper)
        return True

    def running(self) -> int:
        """The helpers counting sets that have not ended."""
        return sum(not self.ended(h) for h in self._helpers)

    def start(self, queries: dict[int, SetQuery]) -> dict[int, SetQuery]:
        """A helper for each query while a core is free (this process keeps one); those left."""
        left: dict[int, SetQuery] = {}
        for n, query in sorted(queries.items()):
            busy = self.running() + sum(not self.ended(h) and not _handed_in(h[1]) for h in self.deciding)
            if busy + 1 >= self.jobs or not can_fork() or not self._fork(n, query):
                left[n] = query
        return left

    def _fork(self, n: int, query: SetQuery) -> bool:
        queue = _TaskQueue.of(1)
        if queue is None:
            return False
        try:
            made = _fork_helper(queue, lambda _i: {n: violating_set(query)}, dict, self._helpers)
        finally:
            queue.close()
        if made:
            self.started[n] = query
        return made

    def collect(self) -> dict[int, dict | None]:
        """The helpers' counts, by obligation position (a dead helper's are missing)."""
        got: dict[int, dict | None] = {}
        for _pid, fd in self._helpers:
            got.update(_collect(fd)[0])
        self._collected = True
        return got

    def stop(self) -> None:
        """Every helper reaped; killed first unless all were collected (an error or a signal
        here). A second Ctrl-C waits until they are (as in `_spread`)."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for helper in self._helpers:
                _reap(*helper, kill=not self._collected and helper not in self._ended)
            self._helpers = []
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _handed_in(fd: int) -> bool:
    """Whether a helper deciding obligations has begun to send its results (or died): it has no
    units left, and only waits for this process to read them (`_collect`, after its own units),
    so its core is free."""
    return bool(select.select([fd], [], [], 0)[0])


class HelperRaised(Exception):
    """A helper met an error (or could not send its results)."""


def _spread(tasks: int, run: Callable[[int], dict], jobs: int, fork_after_s: float,
            extra: Callable[[], dict], ahead: _SetsAhead | None = None) -> tuple[dict, dict]:
    """The results of tasks 0..tasks-1 (`run(i)`: a dict of results), run here and by up to
    `jobs - 1` helpers forked once this process has worked `fork_after_s` with tasks left, each
    taking the next task number from a pipe (fewer while `ahead`'s helpers count sets); and what
    `extra()` gave in each helper after its last task. A task a dead helper took is missing
    from the results."""
    queue = _TaskQueue.of(tasks) if jobs > 1 and tasks > 1 and can_fork() else None
    if queue is None:
        results: dict = {}
        for i in range(tasks):
            results.update(run(i))
        return results, {}
    results, extras = {}, {}
    helpers: list[tuple[int, int]] = []
    fork_at = time.perf_counter() + fork_after_s
    taken = 0  # tasks this process took: before any fork, every task taken
    done = False
    try:
        with sigterm_unwinds():
            while True:
                if not helpers and tasks - taken > 1 and time.perf_counter() >= fork_at:
                    busy = ahead.running() if ahead is not None else 0
                    for _ in range(min(jobs - busy, tasks - taken) - 1):
                        if not _fork_helper(queue, run, extra, helpers):
                            break  # no more processes: the work stays here
                    if ahead is not None:
                        ahead.watch(helpers)
                i = queue.take()
                if i is None:
                    break
                taken += 1
                results.update(run(i))
            for _pid, fd in helpers:
                got, more = _collect(fd)
                results.update(got)
                extras.update(more)
            done = True
    finally:  # an error, SIGTERM or Ctrl-C here: the helpers are stopped, not waited for
        queue.close()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # a second Ctrl-C waits
        try:
            for pid, fd in helpers:
                _reap(pid, fd, kill=not done and not (ahead is not None and ahead.ended((pid, fd))))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if ahead is not None:
            ahead.watch([])
    return results, extras


class _TaskQueue:
    """Task numbers in a pipe, written before any helper is forked; each process reads the next
    one (a read of one 4-byte number is atomic). Nothing is held while a task runs, so a process
    that dies blocks no other."""

    RECORD = struct.Struct("=i")

    def __init__(self, read_end: int):
        self._fd: int | None = read_end

    @classmethod
    def of(cls, tasks: int) -> _TaskQueue | None:
        """A queue of 0..tasks-1, or None when no pipe can be made or they do not fit its buffer
        (written whole before any reader exists)."""
        data = b"".join(cls.RECORD.pack(i) for i in range(tasks))
        try:
            read_end, write_end = os.pipe()
        except OSError:
            return None
        try:
            if len(data) > fcntl.fcntl(write_end, F_GETPIPE_SZ):
                os.close(read_end)
                return None
            os.write(write_end, data)
        except OSError:
            os.close(read_end)
            return None
        finally:
            os.close(write_end)
        return cls(read_end)

    def take(self) -> int | None:
        data = os.read(self._fd, self.RECORD.size)
        return self.RECORD.unpack(data)[0] if len(data) == self.RECORD.size else None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _fork_helper(queue: _TaskQueue, run: Callable[[int], dict], extra: Callable[[], dict],
                 helpers: list[tuple[int, int]]) -> bool:
    """Fork a helper that runs tasks until the queue is empty, writes their results, `extra()`
    and the proofs it learned (for this process's proof memo) to a pipe, and exits; it is in
    `helpers` before Ctrl-C or SIGTERM can reach this process again. False when no pipe or
    process could be made."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return False
    parent = os.getpid()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        gc.freeze()  # the helper's collections never walk (nor write to) what it inherits
        try:
            pid = os.fork()
        finally:
            gc.unfreeze()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(read_end)
        os.close(write_end)
        return False
    if pid:
        os.close(write_end)
        helpers.append((pid, read_end))
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return True
    # the helper: never returns into the caller's code
    code = 1
    try:
        os.close(read_end)
        for sig in (signal.SIGINT, signal.SIGTERM):  # stopped, not unwound: the parent reports
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        die_with_parent(parent)
        proof_memo.MEMO.start_journal()
        results: dict = {}
        while (i := queue.take()) is not None:
            results.update(run(i))
        payload = pickle.dumps(("ok", results, extra(), proof_memo.MEMO.journal()), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - the parent decides everything again, in one process
        try:
            with os.fdopen(write_end, "wb", closefd=False) as pipe:
                pipe.write(pickle.dumps(("raise", f"{type(exc).__name__}: {exc}")))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _collect(fd: int) -> tuple[dict, dict]:
    """A helper's results and extras (its learned proofs go into this process's memo); nothing
    if it died or sent what cannot be read; HelperRaised if it met an error."""
    with os.fdopen(fd, "rb", closefd=False) as pipe:
        data = pipe.read()
    try:
        message = pickle.loads(data)  # written by a helper forked from this process: not untrusted input
    except Exception:  # noqa: BLE001 - a helper killed mid-write: its tasks are run here
        return {}, {}
    if message[0] == "raise":
        raise HelperRaised(message[1])
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
