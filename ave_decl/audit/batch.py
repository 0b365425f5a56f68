"""Batch audit: many `.ave` files, worker processes, per-file time limits, a verdict cache.

Files are checked in chunks (one Datalog fixpoint per chunk: batching is ~2x faster than one
fixpoint per kernel on the embedded engine, see docs/performance.md), each chunk in a forked
worker process that is killed at its deadline. A chunk that times out or crashes is retried file
by file, so one hostile file costs only itself: it ends as UNKNOWN (time limit) or ERROR, and
every other file still gets its verdict.

Which files are read, and how the unreadable ones are reported: discover.py. The cache and its
integrity checks: cache.py.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..lang.errors import ExitCode, UsageError
from ..pipeline import Options, internal_error, read_sources, run
from ..report.model import ErrorReport, KernelReport, Report
from .cache import Cache, key
from .discover import discover, read_regular, unreadable

__all__ = ["AuditOptions", "AuditStats", "audit", "check_files", "discover"]

FileResult = tuple[list[KernelReport], list[ErrorReport]]


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


def check_files(files: list[str], opts: Options) -> dict[str, FileResult]:
    """One pipeline run (one fixpoint) over several files, split back per file."""
    sources, errors = read_sources(files)
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


def _worker(files: list[str], opts: Options, conn) -> None:
    try:
        conn.send(("ok", check_files(files, opts)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("crash", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


@dataclass
class _Task:
    files: list[str]
    deadline: float
    proc: mp.Process
    conn: object


def _run_parallel(chunks: list[list[str]], opts: AuditOptions, done: Callable[[dict[str, FileResult]], None],
                  stats: AuditStats) -> None:
    # fork is fast, but not safe once JAX (multithreaded) is loaded in this process: then spawn
    ctx = mp.get_context("spawn" if "jax" in sys.modules else "fork")
    pending = list(chunks)
    running: list[_Task] = []
    while pending or running:
        while pending and len(running) < max(1, opts.jobs):
            files = pending.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(files, opts.check, child), daemon=True)
            proc.start()
            child.close()
            limit = opts.file_timeout_s * len(files) if opts.file_timeout_s > 0 else math.inf  # 0: no limit
            running.append(_Task(files, time.monotonic() + limit, proc, parent))
        for task in list(running):
            status = None
            if task.conn.poll(0.02):
                try:
                    status, payload = task.conn.recv()
                except EOFError:
                    status, payload = "crash", f"worker exited with code {task.proc.exitcode}"
            elif time.monotonic() > task.deadline:
                status, payload = "timeout", f"no verdict within {opts.file_timeout_s:g} s per file"
            elif not task.proc.is_alive() and not task.conn.poll(0):
                status, payload = "crash", f"worker exited with code {task.proc.exitcode}"
            if status is None:
                continue
            running.remove(task)
            if task.proc.is_alive():
                task.proc.kill()
            task.proc.join()
            task.conn.close()  # type: ignore[attr-defined]
            if status == "ok":
                done(payload)
            elif len(task.files) > 1:  # isolate the bad file: retry one by one
                stats.retried += len(task.files)
                pending.extend([f] for f in task.files)
            else:
                done({task.files[0]: _failed(task.files[0], status, payload)})


def _failed(path: str, status: str, why: str) -> FileResult:
    if status == "timeout":
        from ..report.model import Verdict

        return [KernelReport("<file>", path, Verdict.UNKNOWN, [], 0, {})], [
            ErrorReport(path, "timeout", why, None, f"{path}: error: {why}", int(ExitCode.INCONCLUSIVE))]
    err = internal_error(RuntimeError(why), path)
    return [], [err]


def audit(paths: list[str], opts: AuditOptions, progress: Callable[[int], None] | None = None,
          start: Callable[[int], None] | None = None) -> tuple[Report, AuditStats]:
    """`start(total)` is called once the files are known; `progress(n)` as files finish."""
    opts.validate()  # the fields may have been changed after construction
    started = time.perf_counter()
    files, errors = discover(paths)
    if start:
        start(len(files))
    stats = AuditStats(files=len(files))
    report = Report(engine=opts.check.engine)
    report.errors.extend(errors)
    cache = Cache(opts.cache_dir) if opts.cache_dir else None
    options = {"engine": opts.check.engine, "timeout": opts.check.timeout_s, "confirm": opts.check.confirm,
               "violation_sets": opts.check.violation_sets}
    results: dict[str, FileResult] = {}
    keys: dict[str, str] = {}
    todo = []
    for f in files:
        hit = None
        if cache:
            try:  # never blocks: a FIFO swapped in since discovery is refused, not opened for reading
                keys[f] = key(read_regular(f), options, opts.check.rules_dirs, f)
            except OSError as exc:
                results[f] = ([], [unreadable(f, exc.strerror or type(exc).__name__)])
                if progress:
                    progress(1)
                continue
            hit = cache.get(keys[f], f)
        if hit is not None:
            results[f] = hit
            stats.cached += 1
            if progress:
                progress(1)
        else:
            todo.append(f)

    def done(batch: dict[str, FileResult]) -> None:
        for f, res in batch.items():
            results[f] = res
            stats.checked += 1
            if cache and keys.get(f) and not any(e.kind in ("timeout", "internal") for e in res[1]):
                cache.put(keys[f], f, *res)
            if progress:
                progress(1)

    size = max(1, min(opts.chunk, -(-len(todo) // max(1, opts.jobs))))  # keep every worker busy
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    if opts.jobs <= 1 and chunks and opts.file_timeout_s <= 0:
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
