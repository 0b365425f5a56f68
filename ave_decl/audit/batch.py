"""Batch audit: many `.ave` files, worker processes, per-file time limits, a verdict cache.

Files are checked in chunks (one Datalog fixpoint per chunk: batching is ~2x faster than one
fixpoint per kernel on the embedded engine, see docs/performance.md), each chunk in a forked
worker process that is killed at its deadline. A chunk that times out or crashes is retried file
by file, so one hostile file costs only itself: it ends as UNKNOWN (time limit) or ERROR, and
every other file still gets its verdict. The same chunk function and retry policy serve a Dask
cluster (distributed.py): there each task runs its chunk in a forked child of the worker.

Which files are read, and how the unreadable ones are reported: discover.py. The cache and its
integrity checks: cache.py.
"""
from __future__ import annotations

import gc
import math
import multiprocessing as mp
import numbers
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol, Union

from ..lang.errors import AveError, ExitCode, UsageError
from ..lang.source import MAX_SOURCE_BYTES, SourceFile
from ..lang.source import read_regular as read_source_bytes
from ..pipeline import (Options, error_report, internal_error, learn_proofs, learned_proofs, read_sources, run,
                        start_learning, warm_up)
from ..report.model import ErrorReport, KernelReport, Report
from .cache import Cache, key
from .discover import discover, unreadable

__all__ = ["AuditOptions", "AuditStats", "Outcome", "audit", "check_files", "discover", "run_chunk", "settle"]

FileResult = tuple[list[KernelReport], list[ErrorReport]]
# A file of a chunk: its path, read where the chunk runs, or its path and the bytes this process read
Item = Union[str, tuple[str, bytes]]


@dataclass
class AuditOptions:
    """`file_timeout_s`: wall-clock seconds per file, a finite number > 0, or 0 for no limit."""

    check: Options = field(default_factory=lambda: Options(violation_sets=False))
    jobs: int = os.cpu_count() or 1
    file_timeout_s: float = 120.0
    cache_dir: Path | None = None
    chunk: int = 16

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """UsageError for values that would silently disable or break the limits (NaN, inf, < 0)."""
        t = self.file_timeout_s
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t < 0:
            raise UsageError(f"file timeout must be a finite number of seconds >= 0 (0: no limit), got {t!r}")
        for name in ("jobs", "chunk"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be an integer >= 1, got {v!r}")


@dataclass
class AuditStats:
    files: int = 0
    cached: int = 0
    checked: int = 0
    retried: int = 0
    cache_rejected: int = 0  # entries that failed the integrity check: treated as misses, rewritten
    seconds: float = 0.0


def item_path(item: Item) -> str:
    return item if isinstance(item, str) else item[0]


def load(path: str) -> bytes | FileResult:
    """The bytes of a kernel file as the checker reads them (the same size limit), or, when it
    cannot be read, the file's result: the very error the check itself would report."""
    try:
        return read_source_bytes(path, MAX_SOURCE_BYTES)
    except AveError as exc:
        return [], [error_report(exc, None, path)]
    except OSError as exc:
        return [], [unreadable(path, exc.strerror or type(exc).__name__)]


def read_items(items: list[Item]) -> tuple[list[SourceFile], list[ErrorReport]]:
    """The sources of a chunk: paths are read here, shipped bytes decoded (same errors)."""
    sources: list[SourceFile] = []
    errors: list[ErrorReport] = []
    for item in items:
        if isinstance(item, str):
            found, failed = read_sources([item])
            sources.extend(found)
            errors.extend(failed)
            continue
        path, raw = item
        try:
            sources.append(SourceFile.decode(path, raw))
        except AveError as exc:
            errors.append(error_report(exc, None, path))
    return sources, errors


def check_files(items: list[Item], opts: Options) -> dict[str, FileResult]:
    """One pipeline run (one fixpoint) over several files, split back per file."""
    files = [item_path(i) for i in items]
    sources, errors = read_items(items)
    report = run(sources, opts, errors)
    out: dict[str, FileResult] = {f: ([], []) for f in files}
    for k in report.kernels:
        out.setdefault(k.file, ([], []))[0].append(k)
    for e in report.errors:
        target = e.file if e.file in out else None
        if target is None:  # an engine/rules error concerns every file of the chunk
            for f in files:
                out[f][1].append(e)
        else:
            out[target][1].append(e)
    return out


def _worker(items: list[Item], opts: Options, conn) -> None:
    try:
        start_learning()
        results = check_files(items, replace(opts, jobs=1))  # the audit's -j spreads kernels, not obligations
        conn.send(("ok", (results, learned_proofs())))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("crash", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


@dataclass
class Outcome:
    """How a chunk ended: `ok` with every file's result, or `timeout`/`crash` and why.
    `stored`: files whose cache entry was already written where the chunk ran (a Dask worker)."""

    status: str
    results: dict[str, FileResult] = field(default_factory=dict)
    why: str = ""
    stored: frozenset[str] = frozenset()


class Chunk:
    """One chunk checked in a forked child process, killed at its deadline (per-file limit times
    the number of files). A child cannot hang or crash its parent, so the parent may be the
    local audit or a Dask task alike."""

    def __init__(self, items: list[Item], opts: AuditOptions):
        # fork is fast, but not safe once JAX (multithreaded) is loaded in this process: then spawn
        ctx = mp.get_context("spawn" if "jax" in sys.modules else "fork")
        self.items = items
        self.timeout_s = opts.file_timeout_s
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker, args=(items, opts.check, child), daemon=True)
        _warm_once(opts.check)
        _start_frozen(self.proc)
        child.close()
        limit = opts.file_timeout_s * len(items) if opts.file_timeout_s > 0 else math.inf  # 0: no limit
        self.deadline = time.monotonic() + limit

    def poll(self, wait: float = 0.02) -> Outcome | None:
        """The outcome once the child has answered, died or run out of time (it is then
        stopped), else None after waiting up to `wait` seconds."""
        status = None
        if self.conn.poll(wait):
            try:
                status, payload = self.conn.recv()
            except EOFError:
                status, payload = "crash", f"worker exited with code {self.proc.exitcode}"
        elif time.monotonic() > self.deadline:
            status, payload = "timeout", f"no verdict within {self.timeout_s:g} s per file"
        elif not self.proc.is_alive() and not self.conn.poll(0):
            status, payload = "crash", f"worker exited with code {self.proc.exitcode}"
        if status is None:
            return None
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()
        if status != "ok":
            return Outcome(status, why=payload)
        results, learned = payload
        learn_proofs(learned)  # the next chunks forked here start with this chunk's proofs
        return Outcome("ok", results)


_WARMED: set[tuple] = set()  # the (rules, engine) options this process has warmed up for
# A Dask worker runs chunks on several threads: one warm-up and one frozen fork at a time (a
# thread's unfreeze must not land between another's freeze and its fork)
_FORKING = threading.Lock()


def _warm_once(opts: Options) -> None:
    """pipeline.warm_up, once per process and rule set: what every forked worker would build."""
    key = (opts.rules_dirs, opts.engine)
    with _FORKING:
        if key not in _WARMED:
            warm_up(opts)
            _WARMED.add(key)


def _start_frozen(proc) -> None:
    """Start a worker with every object of this process in the collector's permanent
    generation (gc.freeze), as Python's documentation advises before a fork: the worker's
    collections then never walk the inherited parsers, rule program and modules (a full
    collection walked them all, several per chunk), nor write to their pages (no copy-on-write
    faults). This process gets them back as they were right after the fork."""
    with _FORKING:
        gc.freeze()
        try:
            proc.start()
        finally:
            gc.unfreeze()


def run_chunk(items: list[Item], opts: AuditOptions) -> Outcome:
    """One chunk to its outcome, blocking: what a Dask task runs (audit/distributed.py)."""
    chunk = Chunk(items, opts)
    while (outcome := chunk.poll(0.05)) is None:
        pass
    return outcome


Done = Callable[[dict[str, FileResult], frozenset[str]], None]


def settle(items: list[Item], outcome: Outcome, resubmit: Callable[[list[list[Item]]], None], done: Done,
           stats: AuditStats) -> None:
    """What a finished chunk leads to, wherever it ran: its results; or, when it failed, each of
    its files again on its own (so one hostile file costs only itself); or, for a single file,
    its UNKNOWN (time limit) or ERROR."""
    if outcome.status == "ok":
        done(outcome.results, outcome.stored)
    elif len(items) > 1:
        stats.retried += len(items)
        resubmit([[i] for i in items])
    else:
        path = item_path(items[0])
        done({path: _failed(path, outcome.status, outcome.why)}, frozenset())


def _run_parallel(chunks: list[list[Item]], opts: AuditOptions, done: Done, stats: AuditStats) -> None:
    pending = list(chunks)
    running: list[Chunk] = []
    while pending or running:
        while pending and len(running) < max(1, opts.jobs):
            running.append(Chunk(pending.pop(0), opts))
        for chunk in list(running):
            outcome = chunk.poll()
            if outcome is not None:
                running.remove(chunk)
                settle(chunk.items, outcome, pending.extend, done, stats)


def _failed(path: str, status: str, why: str) -> FileResult:
    if status == "timeout":
        from ..report.model import Verdict

        return [KernelReport("<file>", path, Verdict.UNKNOWN, [], 0, {})], [
            ErrorReport(path, "timeout", why, None, f"{path}: error: {why}", int(ExitCode.INCONCLUSIVE))]
    err = internal_error(RuntimeError(why), path)
    return [], [err]


def cacheable(result: FileResult) -> bool:
    """A result worth caching: not a time limit or a crash, which may not happen next time."""
    return not any(e.kind in ("timeout", "internal") for e in result[1])


class Runner(Protocol):
    """Where the chunks run instead of local worker processes (audit/distributed.py: Dask)."""

    width: int  # chunks that run at once: the chunks are sized so that each of them has work

    def run(self, chunks: list[list[Item]], opts: AuditOptions, keys: dict[str, str], done: Done,
            stats: AuditStats) -> None: ...


def audit(paths: list[str], opts: AuditOptions, progress: Callable[[int], None] | None = None,
          start: Callable[[int], None] | None = None, runner: Runner | None = None) -> tuple[Report, AuditStats]:
    """`start(total)` is called once the files are known; `progress(n)` as files finish. With a
    `runner`, this process reads every file and the chunks carry the kernel text (a runner's
    workers need not see this file system); the report is the same either way."""
    opts.validate()  # the fields may have been changed after construction
    started = time.perf_counter()
    files, errors = discover(paths)
    if start:
        start(len(files))
    stats = AuditStats(files=len(files))
    report = Report(engine=opts.check.engine)
    report.errors.extend(errors)
    cache = Cache(opts.cache_dir) if opts.cache_dir else None
    if cache is not None and runner is None and opts.check.proof_cache is None:
        # proved queries live beside the verdicts (local workers only: a Dask worker elsewhere
        # would fill a folder of its own machine that the client never reads)
        opts = replace(opts, check=replace(opts.check, proof_cache=str(opts.cache_dir)))
    options = {"engine": opts.check.engine, "timeout": opts.check.timeout_s, "confirm": opts.check.confirm,
               "violation_sets": opts.check.violation_sets}
    results: dict[str, FileResult] = {}
    keys: dict[str, str] = {}
    texts: dict[str, bytes] = {}
    todo = []
    for f in files:
        hit = None
        if cache or runner:
            raw = load(f)  # never blocks: a FIFO swapped in since discovery is refused, not opened for reading
            if not isinstance(raw, bytes):
                results[f] = raw
                if progress:
                    progress(1)
                continue
            texts[f] = raw
            if cache:
                keys[f] = key(raw, options, opts.check.rules_dirs, f)
                hit = cache.get(keys[f], f)
        if hit is not None:
            results[f] = hit
            stats.cached += 1
            if progress:
                progress(1)
        else:
            todo.append(f)

    def done(batch: dict[str, FileResult], stored: frozenset[str] = frozenset()) -> None:
        for f, res in batch.items():
            if f in results:
                continue  # results are keyed by file: a chunk delivered twice is counted once
            results[f] = res
            stats.checked += 1
            if cache and keys.get(f) and f not in stored and cacheable(res):
                cache.put(keys[f], f, *res)
            if progress:
                progress(1)

    width = runner.width if runner else opts.jobs
    size = max(1, min(opts.chunk, -(-len(todo) // max(1, width))))  # keep every worker busy
    chunks: list[list[Item]] = [todo[i:i + size] for i in range(0, len(todo), size)]
    if runner:
        runner.run([[(f, texts[f]) for f in c] for c in chunks], opts, keys, done, stats)
    elif opts.jobs <= 1 and chunks and opts.file_timeout_s <= 0:
        for c in chunks:
            done(check_files(c, opts.check))
    elif chunks:
        _run_parallel(chunks, opts, done, stats)
    for f in files:
        kernels, errs = results.get(f, ([], []))
        report.kernels.extend(kernels)
        report.errors.extend(errs)
    stats.cache_rejected = cache.rejected if cache else 0
    stats.seconds = time.perf_counter() - started
    return report, stats
