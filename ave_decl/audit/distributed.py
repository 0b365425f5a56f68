"""`ave audit --scheduler ADDRESS | --dask-local N`: the audit's chunks as Dask tasks.

The client (this process) discovers and reads the files, looks them up in the cache, and submits
each chunk of misses as one task carrying the kernel text, the options and the cache keys: the
workers never read the client's files. A task runs the local audit's own chunk function
(batch.run_chunk: a forked child under the per-file deadline), so a hanging or crashing kernel
costs the worker nothing; a failed chunk comes back and its files are resubmitted one by one
(batch.settle, the local retry policy). A worker lost mid-task (killed, out of memory) is
Dask's to handle: the scheduler re-runs its tasks elsewhere, and a future yields its result once,
so results keyed by file are never lost or counted twice. The worker writes the cache entries of
its chunk into the shared cache directory (atomic writes, cache.py) and says which it wrote; the
client writes the rest. docs/auditing-at-scale.md has the contract.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing as mp
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..lang.errors import UsageError
from ..version import __version__
from .batch import AuditOptions, AuditStats, Done, Item, Outcome, cacheable, item_path, run_chunk, settle
from .cache import Cache, rules_digest

if TYPE_CHECKING:
    from distributed import Client, Future

INSTALL_HINT = "pip install 'ave-decl[dask]'"
CONNECT_TIMEOUT_S = 10.0  # a scheduler that does not answer within this is a usage error (exit 2)
WORKER_WAIT_S = 60.0  # a scheduler without any worker for this long is a usage error too


def require_dask() -> None:
    """UsageError (exit 2) naming the extra to install when Dask distributed is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(f"--scheduler and --dask-local need Dask distributed: {INSTALL_HINT}") from None


def identity(rules_dirs: tuple[str, ...]) -> tuple[str, str]:
    """What a worker must share with the client for its verdicts to be the client's: the tool
    version and the hash of the rules (built-in plus `--rules` directories, same paths)."""
    try:
        return __version__, rules_digest(tuple(rules_dirs))
    except OSError as exc:
        return __version__, f"rules unreadable: {exc.strerror or type(exc).__name__}"


def _allow_children() -> None:
    """Dask starts worker processes as daemons (config `distributed.worker.daemon`), and
    multiprocessing refuses a daemon children. The chunk's child is itself a daemon that the
    deadline kills, so nothing outlives the task: the flag is lifted for this worker process."""
    mp.current_process()._config["daemon"] = False  # type: ignore[attr-defined]


@contextmanager
def run_marker(directory: Path | None) -> Iterator[str | None]:
    """The name of a file that only this run creates in the cache directory (removed at the
    end): a worker that sees it sees the client's directory, not a local one under the same path
    (the default ~/.cache/ave exists on every machine), so it never fills a cache the client
    cannot read. None when there is no cache or it cannot be written (then the client writes)."""
    if directory is None:
        yield None
        return
    name = f".ave-run-{uuid.uuid4().hex}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).touch(exist_ok=False)
    except OSError:
        yield None
        return
    try:
        yield name
    finally:
        (directory / name).unlink(missing_ok=True)


def check_chunk(items: list[Item], opts: AuditOptions, keys: dict[str, str], expected: tuple[str, str],
                marker: str | None = None) -> Outcome:
    """The Dask task: the chunk checked as the local audit checks it; its entries written to the
    cache when this worker sees the client's cache directory (`marker`, see run_marker)."""
    found = identity(opts.check.rules_dirs)
    if found != expected:
        return Outcome("crash", why=f"this worker runs ave-decl {found[0]} with rules {found[1][:12]}, "
                                    f"the client {expected[0]} with rules {expected[1][:12]}")
    _allow_children()
    outcome = run_chunk(items, opts)
    if outcome.status == "ok" and opts.cache_dir and marker and (opts.cache_dir / marker).is_file():
        cache = Cache(opts.cache_dir)
        outcome.stored = frozenset(f for f, res in outcome.results.items()
                                   if f in keys and cacheable(res) and cache.put(keys[f], f, *res))
    return outcome


def _outcome(future: Future) -> Outcome:
    """A task's outcome; a task that failed in Dask itself (a worker lost too often, the
    scheduler gone) is a crash of its chunk, retried file by file like a local crash."""
    try:
        return future.result()
    except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - any Dask failure
        return Outcome("crash", why=f"Dask task failed: {type(exc).__name__}: {exc}")


class DaskRunner:
    """Runs an audit's chunks on the workers of a Dask client (batch.Runner)."""

    def __init__(self, client: Client):
        self.client = client
        self.width = max(1, sum(client.nthreads().values()))

    def check_workers(self, rules_dirs: tuple[str, ...]) -> None:
        """UsageError when a connected worker has another version or other rules."""
        expected = identity(rules_dirs)
        for address, found in sorted(self.client.run(identity, rules_dirs).items()):
            if tuple(found) != expected:
                raise UsageError(f"Dask worker {address} runs ave-decl {found[0]} with rules {found[1][:12]}; "
                                 f"this client runs {expected[0]} with rules {expected[1][:12]}")

    def run(self, chunks: list[list[Item]], opts: AuditOptions, keys: dict[str, str], done: Done,
            stats: AuditStats) -> None:
        from distributed import as_completed

        expected = identity(opts.check.rules_dirs)
        run_id = uuid.uuid4().hex[:12]
        numbers = itertools.count()
        submitted: dict[str, list[Item]] = {}
        with run_marker(opts.cache_dir) as marker:

            def submit(items: list[Item]) -> Future:
                chunk_keys = {item_path(i): keys[item_path(i)] for i in items if item_path(i) in keys}
                future = self.client.submit(check_chunk, items, opts, chunk_keys, expected, marker,
                                            key=f"ave-audit-{run_id}-{next(numbers)}", pure=False)
                submitted[future.key] = items
                return future

            stream = as_completed([submit(c) for c in chunks])
            for future in stream:
                items = submitted.pop(future.key)
                settle(items, _outcome(future), lambda more: [stream.add(submit(c)) for c in more], done, stats)
                future.release()


@contextmanager
def dask_runner(scheduler: str | None, local_workers: int | None, rules_dirs: tuple[str, ...] = ()
                ) -> Iterator[DaskRunner]:
    """A runner on the scheduler at `scheduler`, or on a LocalCluster of `local_workers` worker
    processes (one thread each) started here and shut down on exit."""
    require_dask()
    from distributed import Client, LocalCluster

    if local_workers:
        with LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True, scheduler_port=0,
                          dashboard_address=":0", silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
            client.wait_for_workers(local_workers, timeout=WORKER_WAIT_S)
            yield DaskRunner(client)
        return
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - a malformed, unknown or silent address alike
        raise UsageError(f"--scheduler {scheduler}: cannot connect: {type(exc).__name__}: {exc}") from None
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise UsageError(f"--scheduler {scheduler}: no worker joined within {WORKER_WAIT_S:g} s") from None
        runner = DaskRunner(client)
        runner.check_workers(rules_dirs)
        yield runner

