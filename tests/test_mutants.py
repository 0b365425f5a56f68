"""The `make test-slow` slice of the mutation benchmark (bench/mutants.py --fast) and the memory-discipline
invariants on the shipped workloads. The full run is documented in docs/mutation-benchmark.md."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import ave_decl
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS, mutants

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_mutants", ROOT / "bench" / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # ~95 s on 2 cores: `make test-slow` (the property tests of test_fuzzing.py cover mutants in `make test`)
def test_fast_mutation_slice_is_sound_and_confirmed():
    result = _bench().run(fast=True)
    s = result["summary"]
    assert s["false_alarms"] == 0
    assert s["unsound_verified"] == 0
    assert s["mutants"] >= 3
    # every mutant of the slice changes behaviour in the simulator and is flagged with a replayed counterexample
    for case in result["cases"]:
        if case["mutant"] is not None:
            assert case["truth"]["bad"], case
            assert case["verdict"] == "VIOLATION" and case["confirmed"], case


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_operators_make_parseable_mutants(op):
    from ave_decl.lang.parser import parse_text

    patterns = ("*.ave", "tails/*.ave", "pipelines/*.ave", "specialized/*.ave", "lanes/*.ave",
                "buffers/*.ave", "packed/*.ave")
    workloads = [p for pattern in patterns for p in sorted((ROOT / "examples").glob(pattern))]
    made = [m for p in workloads for m in mutants(p.read_text(), [op])]
    assert made, f"{op} applies to no shipped workload"
    for m in made:
        parse_text(m.text)


def test_pipelined_off_by_one_stage_is_caught_with_replayed_race():
    text = (ROOT / "examples" / "gemm_pipelined.ave").read_text()
    (m,) = mutants(text, ["off_by_one_stage"])
    report = ave_decl.check(m.text, path="stage.ave", confirm=True, violation_sets=False)
    (k,) = report.kernels
    assert k.verdict == Verdict.VIOLATION
    races = [f for f in k.findings if f.invariant in ("ave/shared-race", "ave/async-copy-wait")
             and f.verdict == Verdict.VIOLATION]
    assert races and any(f.replay["confirmed"] for f in races)
