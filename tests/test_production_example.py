"""The production-shaped AMD flash-attention example (issue 21, item 8): 8 waves, 256 query rows
per block, head dim 128, GQA 8:1, two K/V pages, V^T through LDS with packed stores, running max
and final normalisation, a wave-specialized schedule, the next K/V block prefetched under
`if kb + 32 < S`. The verdicts take about 4 s and 6 s warm on 2 cores (docs/performance.md,
Session 29)."""
from __future__ import annotations

from conftest import EXAMPLES

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.report.model import Verdict

FA = EXAMPLES / "production" / "fa_fwd_gfx942.ave"
BUG = EXAMPLES / "production" / "fa_fwd_gfx942_pv_layout.ave"


def test_the_kernel_simulates_to_the_reference_over_two_pages(ave):
    r = ave("simulate", FA, "--sizes", "S=64")
    assert r.code == 0 and "the output matches the reference; every shadow check passed" in r.out, r.out


def test_its_pv_layout_bug_fails_the_k_pairing_at_the_pv_instructions(ave):
    r = ave("simulate", BUG, "--sizes", "S=64")
    assert r.code == 1 and "differs from the reference" in r.out, r.out
    pv_lines = [i + 1 for i, ln in enumerate(BUG.read_text().splitlines()) if "= pv_step(" in ln]
    failed = {ln.split(" line ")[1].split(":")[0] for ln in r.out.splitlines()
              if ln.strip().startswith("shadow [ave/mma-k-pairing]") and "FAIL" in ln.upper() and "ok (" not in ln}
    assert failed and {int(x) for x in failed} <= set(pv_lines), (failed, pv_lines, r.out)


def test_it_round_trips():
    m = parse_text(FA.read_text())
    assert parse_text(printer.module(m)) == m


def test_the_kernel_verifies():
    (k,) = ave_decl.check(FA.read_text(), path=str(FA), violation_sets=False).kernels
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.location.line, f.message) for f in k.findings
                                           if f.verdict != Verdict.VERIFIED and f.severity == "error"]


def test_its_bug_is_a_replayed_k_pairing_violation_at_each_pv_instruction():
    (k,) = ave_decl.check(BUG.read_text(), path=str(BUG), confirm=True, violation_sets=False).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    pv_lines = [i + 1 for i, ln in enumerate(BUG.read_text().splitlines()) if "= pv_step(" in ln]
    assert sorted(f.location.line for f in bad) == pv_lines
    assert {f.invariant for f in bad} == {"ave/mma-k-pairing"}
    assert all(f.replay["confirmed"] for f in bad)
