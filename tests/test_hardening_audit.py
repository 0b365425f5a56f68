"""Issue 20, `ave audit`: the cache names each file by its own path, cache entries are checked
before they are trusted, unreadable entries of a corpus are reported (never skipped, never opened
when they are FIFOs), the file deadline cannot be disabled through the Python API, and
`--no-timings` makes `--json` byte-identical across runs, job counts and cache states."""
from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import CORPUS, EXAMPLES, ROOT

from ave_decl.audit.batch import AuditOptions, audit
from ave_decl.audit.cache import FORMAT, Cache, _digest, key
from ave_decl.audit.decode import BadEntry, decode_file_result
from ave_decl.audit.discover import read_regular
from ave_decl.lang.errors import UsageError
from ave_decl.pipeline import Options

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
TIMING_KEYS = {"timings_ms", "solver_ms"}


def _keys(x) -> set[str]:
    if isinstance(x, dict):
        return set(x) | {k for v in x.values() for k in _keys(v)}
    if isinstance(x, list):
        return {k for v in x for k in _keys(v)}
    return set()


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json"))


# ------------------------------------------------------------------ 1. the cache key and the path
def test_a_copy_under_another_name_is_reported_with_its_own_path(tmp_path, ave, monkeypatch):
    d = tmp_path / "k"
    d.mkdir()
    shutil.copy(EXAMPLES / "gemm_lds_mfma_transposed.ave", d / "first.ave")
    cache = tmp_path / "cache"
    monkeypatch.chdir(tmp_path)
    assert ave("audit", "k", "--cache-dir", cache, "-q").code == 1
    shutil.copy(d / "first.ave", d / "second.ave")  # same bytes, another name
    r = ave("audit", "k", "--cache-dir", cache, "--json", "o.json", "--sarif", "o.sarif")
    assert r.code == 1 and "1 from cache" in r.out
    data = json.loads((tmp_path / "o.json").read_text())
    assert [k["file"] for k in data["kernels"]] == ["k/first.ave", "k/second.ave"]
    for k in data["kernels"]:
        locations = [f["location"]["file"] for f in k["findings"]]
        assert locations and set(locations) == {k["file"]}, (k["file"], set(locations))
    assert "(k/second.ave)" in r.out and "--> k/second.ave:" in r.out
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for res in json.loads((tmp_path / "o.sarif").read_text())["runs"][0]["results"]
            for loc in res["locations"]}
    assert uris == {"k/first.ave", "k/second.ave"}


def test_the_key_depends_on_the_path():
    assert key(b"x", {}, (), "a.ave") != key(b"x", {}, (), "b.ave")
    assert key(b"x", {}, (), "a.ave") == key(b"x", {}, (), "a.ave")


# ------------------------------------------------------------------ 2. cache entries are untrusted
def _truncated(text: str) -> str:
    return text[: len(text) // 2]


def _legacy_empty(text: str) -> str:
    return json.dumps({"kernels": [], "errors": []})  # the pre-issue-20 format, with nothing in it


def _rehashed(mutate):
    """A well-formed, correctly hashed entry whose payload has been changed: the hash does not
    protect against a deliberate writer, the strict decoding must."""
    def edit(text: str) -> str:
        entry = json.loads(text)
        mutate(entry["payload"])
        entry["sha256"] = _digest(entry["key"], entry["path"], entry["payload"])
        return json.dumps(entry)
    return edit


def _set(path: str, value):
    def mutate(payload):
        target = payload
        *head, last = path.split(".")
        for part in head:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return mutate


def _drop_kernels(payload):
    payload["kernels"] = []


BAD_TEXT = {
    "legacy-empty": _legacy_empty,
    "empty-object": lambda t: "{}",
    "list": lambda t: "[]",
    "null": lambda t: "null",
    "number": lambda t: "7",
    "empty-file": lambda t: "",
    "truncated": _truncated,
    "not-utf8": lambda t: "\udcff",  # written with surrogateescape: byte 0xff
    "nan": lambda t: t.replace('"obligations": ', '"obligations": NaN, "x": ', 1),
    "deep": lambda t: "[" * 100_000 + "]" * 100_000,
    "hash-mismatch": lambda t: t.replace('"VIOLATION"', '"VERIFIED"'),
    "other-path": lambda t: t.replace('"path": "', '"path": "x', 1),
    "rehashed-dropped-kernel": _rehashed(_drop_kernels),
    "rehashed-verdict-int": _rehashed(_set("kernels.0.verdict", 5)),
    "rehashed-verdict-unknown-word": _rehashed(_set("kernels.0.verdict", "MAYBE")),
    "rehashed-obligations-str": _rehashed(_set("kernels.0.obligations", "3")),
    "rehashed-obligations-bool": _rehashed(_set("kernels.0.obligations", True)),
    "rehashed-findings-null": _rehashed(_set("kernels.0.findings", None)),
    "rehashed-location-null": _rehashed(_set("kernels.0.findings.0.location", None)),
    "rehashed-line-float": _rehashed(_set("kernels.0.findings.0.location.line", 1.5)),
    "rehashed-extra-field": _rehashed(_set("kernels.0.findings.0.extra", 1)),
    "rehashed-replay-empty": _rehashed(_set("kernels.0.findings.0.replay", {})),
    "rehashed-violation-set": _rehashed(_set("kernels.0.findings.0.violation_set", {"count": 1})),
    "rehashed-timing-str": _rehashed(_set("kernels.0.timings_ms", {"parse": "1"})),
    "rehashed-kernel-of-another-file": _rehashed(_set("kernels.0.file", "elsewhere.ave")),
    "rehashed-errors-object": _rehashed(_set("errors", {})),
}


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """One kernel file with a violation, its clean report and a cache holding its one entry."""
    root = tmp_path_factory.mktemp("primed")
    d = root / "k"
    d.mkdir()
    shutil.copy(EXAMPLES / "gemm_lds_mfma_transposed.ave", d / "t.ave")
    cache = root / "cache"
    report, stats = audit([str(d)], AuditOptions(Options(violation_sets=False), jobs=1, file_timeout_s=600,
                                                 cache_dir=cache))
    (entry,) = _entries(cache)
    assert stats.checked == 1 and report.exit_code == 1
    return d, cache, entry.read_text(), report.to_json(timings=False)


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_a_bad_cache_entry_is_refused(tmp_path, primed, case):
    _, primed_cache, good_text, _ = primed
    entry = json.loads(good_text)
    cache = Cache(tmp_path)
    target = tmp_path / entry["key"][:2] / f"{entry['key']}.json"
    target.parent.mkdir()
    target.write_text(good_text)
    assert cache.get(entry["key"], entry["path"]) is not None and cache.rejected == 0
    target.write_bytes(BAD_TEXT[case](good_text).encode("utf-8", "surrogateescape"))
    assert cache.get(entry["key"], entry["path"]) is None and cache.rejected == 1


@pytest.mark.parametrize("case", ["legacy-empty", "truncated", "rehashed-verdict-int"])
def test_a_bad_cache_entry_is_a_miss_and_is_rewritten(tmp_path, primed, case):
    d, primed_cache, good_text, clean = primed
    cache = tmp_path / "cache"
    shutil.copytree(primed_cache, cache)
    (entry,) = _entries(cache)
    entry.write_bytes(BAD_TEXT[case](good_text).encode("utf-8", "surrogateescape"))
    opts = AuditOptions(Options(violation_sets=False), jobs=1, file_timeout_s=600, cache_dir=cache)
    report, stats = audit([str(d)], opts)
    assert stats.cached == 0 and stats.checked == 1 and stats.cache_rejected == 1
    assert report.to_json(timings=False) == clean
    assert json.loads(entry.read_text())["format"] == FORMAT  # rewritten, and now a hit:
    again, stats = audit([str(d)], opts)
    assert stats.cached == 1 and again.to_json(timings=False) == clean


def test_a_bad_entry_through_the_cli_is_no_internal_error(tmp_path, primed, ave):
    d, primed_cache, _, clean = primed
    for text in ("{}", "[]", "null", '{"kernels": [], "errors": []}', '{"kernels": [{"kernel": 1}], "errors": []}',
                 '{"kernels": "x", "errors": 3}'):
        cache = tmp_path / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(primed_cache, cache)
        _entries(cache)[0].write_text(text)
        out = tmp_path / "o.json"
        r = ave("audit", d, "--cache-dir", cache, "--json", out, "--no-timings", "-q")
        assert r.code == 1, (text, r.out, r.err)
        assert "0 from cache" in r.out and json.loads(out.read_text()) == clean


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink-loop"])
def test_an_entry_that_is_not_a_regular_file_is_a_miss(tmp_path, primed, kind):
    d, primed_cache, _, clean = primed
    cache = tmp_path / "cache"
    shutil.copytree(primed_cache, cache)
    (entry,) = _entries(cache)
    entry.unlink()
    if kind == "directory":
        entry.mkdir()  # the rewrite cannot replace it either: the audit just runs uncached
    elif kind == "fifo":
        os.mkfifo(entry)  # reading it would block forever
    else:
        entry.symlink_to(entry.name)
    report, stats = audit([str(d)], AuditOptions(Options(violation_sets=False), jobs=1, file_timeout_s=600,
                                                 cache_dir=cache))
    assert stats.cached == 0 and report.to_json(timings=False) == clean


def test_an_unwritable_cache_is_skipped(tmp_path, primed):
    d, _, _, clean = primed
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    report, _ = audit([str(d)], AuditOptions(Options(violation_sets=False), jobs=1, file_timeout_s=600,
                                             cache_dir=blocker))
    assert report.to_json(timings=False) == clean


def test_strict_decoding_round_trips_a_real_report(primed):
    _, _, good_text, clean = primed
    kernels, errors = decode_file_result(json.loads(good_text)["payload"])
    assert [k.kernel for k in kernels] == [k["kernel"] for k in clean["kernels"]] and errors == []
    for bad in ({}, [], None, {"kernels": None, "errors": []}, {"kernels": [], "errors": [], "x": 1}):
        with pytest.raises(BadEntry):
            decode_file_result(bad)


def test_a_bad_value_deep_in_an_entry_is_named_by_its_path(primed):
    """The decoders are built once per type and make a path only for a bad entry; the message
    still says where the entry is wrong."""
    _, _, good_text, _ = primed
    payload = json.loads(good_text)["payload"]
    kernel = payload["kernels"][0]
    assert kernel["findings"], "the primed kernel has findings"
    cases = [(("findings", 0, "location", "line"), "x", "kernels[0].findings[0].location.line: expected an integer"),
             (("findings", 0, "verdict"), "NOPE", "kernels[0].findings[0].verdict: not a Verdict"),
             (("timings_ms", "parse"), float("inf"), "kernels[0].timings_ms.parse: expected a finite number"),
             (("obligations",), True, "kernels[0].obligations: expected an integer")]
    for path, value, message in cases:
        bad = json.loads(good_text)["payload"]
        target = bad["kernels"][0]
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        with pytest.raises(BadEntry, match=re.escape(message)):
            decode_file_result(bad)


def test_cache_get_never_raises_on_garbage(tmp_path):
    cache = Cache(tmp_path)
    k = "ab" * 32
    path = tmp_path / k[:2] / f"{k}.json"
    path.parent.mkdir()
    for text in ("{}", "[]", "null", "{", '{"format": "%s", "key": "%s", "path": "p", "sha256": 1, "payload": 2}'
                 % (FORMAT, k), '{"format": "%s", "key": "%s", "path": "p", "sha256": "%s", "payload": 2}'
                 % (FORMAT, k, _digest(k, "p", 2))):
        path.write_text(text)
        assert cache.get(k, "p") is None, text


# ------------------------------------------------------------------ 3. unreadable corpus entries
def _hostile_corpus(root: Path) -> Path:
    d = root / "corpus"
    d.mkdir()
    shutil.copy(EXAMPLES / "gemm_naive.ave", d / "good.ave")
    (d / "dir.ave").mkdir()
    shutil.copy(EXAMPLES / "gemm_naive.ave", d / "dir.ave" / "inner.ave")
    (d / "dangling.ave").symlink_to("nowhere.ave")
    (d / "loop.ave").symlink_to("loop.ave")
    os.mkfifo(d / "fifo.ave")  # opening it for reading would block: no writer ever comes
    (d / "self").symlink_to(".")  # a directory loop: links to directories are not followed
    return d


UNREADABLE = {"dangling.ave": "dangling symbolic link", "dir.ave": "is a directory", "fifo.ave": "FIFO",
              "loop.ave": "symbolic link loop"}


@pytest.mark.parametrize("cached", [False, True])
def test_unreadable_entries_are_reported_and_the_batch_goes_on(tmp_path, ave, cached):
    d = _hostile_corpus(tmp_path)
    out = tmp_path / "o.json"
    cache = ["--cache-dir", tmp_path / "cache"] if cached else ["--no-cache"]
    r = ave("audit", d, *cache, "--json", out, "--no-timings")
    assert r.code == 2, r.out  # unreadable input is a usage error, as in `ave check`
    data = json.loads(out.read_text())
    jsonschema.validate(data, SCHEMA)
    errors = {Path(e["file"]).name: e for e in data["errors"]}
    assert set(errors) == set(UNREADABLE)
    for name, why in UNREADABLE.items():
        e = errors[name]
        assert e["kind"] == "usage" and e["exit_code"] == 2 and why in e["message"], e
        assert f"{d / name}: error: cannot read file: " in r.out
    assert sorted((Path(k["file"]).name, k["verdict"]) for k in data["kernels"]) == [
        ("good.ave", "VERIFIED"), ("inner.ave", "VERIFIED")]
    assert "Traceback" not in r.out + r.err


def test_unreadable_paths_given_by_name(tmp_path, ave):
    d = _hostile_corpus(tmp_path)
    r = ave("audit", d / "fifo.ave", d / "loop.ave", d / "dangling.ave", d / "good.ave", "--no-cache")
    assert r.code == 2
    assert "is a FIFO" in r.out and "symbolic link loop" in r.out and "dangling symbolic link" in r.out
    assert "1 file(s), 1 kernel(s): 1 verified" in r.out


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any directory")
def test_a_directory_that_cannot_be_listed_is_reported(tmp_path, ave):
    d = _hostile_corpus(tmp_path)
    locked = d / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        r = ave("audit", d, "--no-cache")
    finally:
        locked.chmod(0o755)
    assert r.code == 2 and f"{locked}: error: cannot read file: cannot list directory" in r.out


def test_reading_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "f.ave"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="FIFO"):
        read_regular(str(fifo))


# ------------------------------------------------------------------ 6. the deadline cannot be disabled
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), -1.0, "3", None, True])
def test_file_timeout_must_be_finite(value):
    with pytest.raises(UsageError, match="file timeout"):
        AuditOptions(file_timeout_s=value)


@pytest.mark.parametrize("field, value", [("jobs", 0), ("jobs", 1.5), ("chunk", 0), ("chunk", float("nan"))])
def test_jobs_and_chunk_must_be_positive_integers(field, value):
    with pytest.raises(UsageError, match=field):
        AuditOptions(**{field: value})


def test_a_non_finite_timeout_set_after_construction_is_refused(tmp_path):
    opts = AuditOptions(jobs=2)
    opts.file_timeout_s = float("nan")
    with pytest.raises(UsageError):
        audit([str(EXAMPLES / "gemm_naive.ave")], opts)


def test_cli_file_timeout_nan_is_a_usage_error(ave):
    r = ave("audit", EXAMPLES / "gemm_naive.ave", "--file-timeout", "nan", "--no-cache", "-q")
    assert r.code == 2 and "Traceback" not in r.out + r.err


def test_zero_file_timeout_means_no_limit_with_several_jobs(tmp_path):
    d = tmp_path / "k"
    d.mkdir()
    for n in ("gemm_naive.ave", "gemm_lds_mfma.ave"):
        shutil.copy(EXAMPLES / n, d / n)
    report, _ = audit([str(d)], AuditOptions(Options(violation_sets=False), jobs=2, file_timeout_s=0))
    assert not report.errors and [k.verdict.value for k in report.kernels] == ["VERIFIED", "VERIFIED"]


# ------------------------------------------------------------------ 5. --no-timings: byte-identical JSON
def _cli(*args, seed: int) -> subprocess.CompletedProcess:
    """A fresh interpreter per run, each with another hash seed: set and dict orders differ."""
    return _cli_together([args], seeds=(seed,))[0]


def _cli_together(runs: list[tuple], seeds: tuple[int, ...]) -> list[subprocess.CompletedProcess]:
    """Fresh interpreters running at the same time, one per (arguments, hash seed)."""
    procs = []
    for args, seed in zip(runs, seeds):
        cmd = [sys.executable, "-m", "ave_decl.cli", *map(str, args)]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                            env={**os.environ, "PYTHONHASHSEED": str(seed)})))
    out = []
    for cmd, p in procs:
        stdout, stderr = p.communicate()
        out.append(subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr))
    return out


def test_no_timings_drops_every_timing_field(ave):
    data = ave("check", "--json", "--no-timings", EXAMPLES / "gemm_lds_mfma_transposed.ave").json()
    jsonschema.validate(data, SCHEMA)
    assert not _keys(data) & TIMING_KEYS
    assert not [k for k in _keys(data) if k.endswith("_ms") or k in ("seconds", "throughput")]
    timed = ave("check", "--json", EXAMPLES / "gemm_lds_mfma_transposed.ave").json()
    assert _keys(timed) >= TIMING_KEYS  # without the switch, nothing changes
    r = ave("check", "-v", "--no-timings", EXAMPLES / "gemm_naive.ave")
    assert " ms)" not in r.out and "queries)" in r.out


def test_no_timings_excludes_time(ave):
    assert ave("check", "--no-timings", "--time", EXAMPLES / "gemm_naive.ave").code == 2
    assert ave("audit", "--no-timings", "--time", "--no-cache", EXAMPLES / "gemm_naive.ave").code == 2


def test_check_json_is_byte_identical_across_runs():
    """Two processes at once (each with its own hash seed): the second core is used, and the
    runs also see each other's load, which must not change a byte either."""
    files = sorted(EXAMPLES.glob("*.ave"))
    first, second = _cli_together([("check", "--json", "--no-timings", *files)] * 2, seeds=(1, 2))
    assert first.returncode == second.returncode == 1, first.stderr
    assert first.stdout == second.stdout, _first_difference(first.stdout, second.stdout)


def test_audit_json_is_byte_identical_across_jobs_and_cache(tmp_path):
    runs = {  # the first two compute every file afresh (the second also fills the cache)
        "j1 no cache": ("-j", "1", "--no-cache"),
        "j2 cold cache": ("-j", "2", "--cache-dir", tmp_path / "cache"),
        "j1 warm cache": ("-j", "1", "--cache-dir", tmp_path / "cache"),
        "j2 warm cache": ("-j", "2", "--cache-dir", tmp_path / "cache"),
    }
    out = {}
    names = list(runs)
    # the two runs that compute afresh go together (they share no cache), then the two warm ones
    for pair in (names[:2], names[2:]):
        seeds = tuple(names.index(n) + 1 for n in pair)
        procs = _cli_together([("audit", *CORPUS, *runs[n], "--json", tmp_path / f"{s}.json", "--no-timings", "-q")
                               for n, s in zip(pair, seeds)], seeds)
        for name, seed, p in zip(pair, seeds, procs):
            assert p.returncode == 1, (name, p.stdout, p.stderr)
            assert b" s (" not in p.stdout  # no elapsed seconds in the summary either
            out[name] = (tmp_path / f"{seed}.json").read_bytes()
    assert b"10 from cache" in p.stdout  # the last run was served from the cache
    reference = out["j1 no cache"]
    for name, data in out.items():
        assert data == reference, (name, _first_difference(reference, data))


def _first_difference(a: bytes, b: bytes) -> str:
    """The first differing line, with the JSON key path it is under (for the lead's report)."""
    la, lb = a.decode(errors="replace").splitlines(), b.decode(errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            keys = [line.strip().split('"')[1] for line in la[max(0, i - 30):i] if line.strip().startswith('"')]
            return f"line {i + 1} (after {keys[-5:]}): {x.strip()!r} != {y.strip()!r}"
    return f"lengths {len(la)} != {len(lb)}"
