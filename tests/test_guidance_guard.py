"""The reward-hacking guard (issue 15): `ave check --frozen-spec ORIGINAL` and its API
(`ave_decl.lang.spec.frozen_spec_changes`) reject every candidate that changes the kernel's
signature, reference, tags, assumes or assertions, or drops a tagged tensor, and accept a
candidate that only reformats the kernel or edits its body."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.lang.spec import frozen_spec_changes

ROOT = Path(__file__).resolve().parent.parent
GEMM = (ROOT / "examples" / "gemm_lds_mfma.ave").read_text()

# (what it changes, old text, new text): each must be rejected with that kind
SPEC_EDITS = [
    ("signature", "C: Tensor[f32, (M, N)]", "C: Tensor[f32, (M, K)]"),
    ("signature", "def gemm_lds_mfma(", "def gemm_other("),
    ("signature", "block=256", "block=128"),
    ("reference", 'reference="C = A @ B"', 'reference="C = A @ B", tolerance=1.0'),
    ("reference", 'reference="C = A @ B"', 'reference="C = B.T @ A.T"'),
    ("tag", 'tag(B, lambda k, n: (k, n), "B")', 'tag(B, lambda k, n: (n, k), "B")'),
    ("tag", '    tag(C, lambda m, n: (m, n), "C")\n', ""),
    ("assume", "K >= 64)", "K >= 128)"),
    ("assume", "    assume(M % 64 == 0, N % 64 == 0, K % 64 == 0, K >= 64)\n", ""),
    ("assertion", "ta[1] == tb[0]", "ta[1] == tb[1]"),
    ("assertion", "            assert_tag(a, b, lambda ta, tb: ta[1] == tb[0])\n", ""),
    ("assertion", "            acc = mfma", "            assert_tag_eq(a, a)\n            acc = mfma"),
]


@pytest.mark.parametrize("kind,old,new", SPEC_EDITS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SPEC_EDITS)])
def test_the_guard_rejects_every_spec_change(kind, old, new):
    assert GEMM.count(old) == 1
    changes = frozen_spec_changes(GEMM, GEMM.replace(old, new), "orig.ave", "cand.ave")
    assert changes and kind in {c.kind for c in changes}
    for c in changes:
        assert c.one_line().startswith(("cand.ave:", "orig.ave:")) and "error: frozen spec:" in c.one_line()


def test_the_public_api_is_the_same_comparison():
    import ave_decl

    hack = GEMM.replace("ta[1] == tb[0]", "True")
    assert ave_decl.frozen_spec_changes(GEMM, hack) == frozen_spec_changes(GEMM, hack, "<original>", "<string>")
    assert ave_decl.frozen_spec_changes(GEMM, GEMM) == []


def test_moving_an_assertion_out_of_its_loop_is_a_change():
    line = "            assert_tag(a, b, lambda ta, tb: ta[1] == tb[0])\n"
    moved = GEMM.replace(line, "").replace("    for r in range(16):", line[8:] + "    for r in range(16):")
    assert [c.kind for c in frozen_spec_changes(GEMM, moved)] == ["assertion"]


def test_dropping_a_tagged_local_tensor_is_a_change():
    text = (ROOT / "tests" / "data" / "helpers" / "register_tag_claim.ave").read_text()
    line = "    b = local(f32, (4,))\n"
    assert text.count(line) == 1
    changes = frozen_spec_changes(text, text.replace(line, ""))
    assert [c.kind for c in changes] == ["tagged-tensor"] and "tagged tensor b" in changes[0].message


def test_body_edits_and_reformatting_are_not_changes():
    assert frozen_spec_changes(GEMM, GEMM.replace("As[(w // 2) * 32 + lane % 32, ks + (lane // 32) * 4 + v]",
                                                  "As[ks + (lane // 32) * 4 + v, (w // 2) * 32 + lane % 32]")) == []
    assert frozen_spec_changes(GEMM, printer.module(parse_text(GEMM))) == []  # comments gone, spacing canonical
    assert frozen_spec_changes(GEMM, GEMM.replace("        syncthreads()\n        for ks", "        for ks")) == []
    assert frozen_spec_changes(GEMM, GEMM.replace("range(0, K, 64)", "range(0, K - 64, 64)")) == []


def _ave(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ave_decl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_cli_option_exit_codes(tmp_path):
    (tmp_path / "orig.ave").write_text(GEMM)
    (tmp_path / "hack.ave").write_text(GEMM.replace("ta[1] == tb[0]", "True"))
    (tmp_path / "same.ave").write_text(GEMM)
    (tmp_path / "bad.ave").write_text("def (\n")
    r = _ave("check", "--frozen-spec", "orig.ave", "hack.ave", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("hack.ave:32:13: error: frozen spec:"), r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    r = _ave("check", "--no-violation-sets", "--frozen-spec", "orig.ave", "same.ave", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _ave("check", "--frozen-spec", "orig.ave", "bad.ave", cwd=tmp_path)
    assert r.returncode == 3 and r.stderr.startswith("bad.ave:1:1: error:") and "Traceback" not in r.stderr
    r = _ave("check", "--frozen-spec", "missing.ave", "same.ave", cwd=tmp_path)
    assert r.returncode == 2
