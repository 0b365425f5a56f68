"""`@device` helpers (lang/inline.py): inlined per call, with per-call names, tags and locations."""
from __future__ import annotations

import pytest
from conftest import DATA, EXAMPLES, ONE_WAVE, front_end_error

import ave_decl
from ave_decl.lang import ast as A
from ave_decl.lang import printer
from ave_decl.lang.errors import FrontEndError
from ave_decl.lang.inline import MAX_INLINED_STATEMENTS
from ave_decl.lang.parser import parse_text
from ave_decl.report.model import Verdict

GEMM = EXAMPLES / "helpers" / "gemm_helpers.ave"
GEMM_BAD = EXAMPLES / "helpers" / "gemm_helpers_b_offset.ave"
FRAGMENTS = DATA / "helpers" / "fragment_tags.ave"
FRAGMENTS_BAD = DATA / "helpers" / "fragment_tags_b_order.ave"


def _errors(report):
    (k,) = report.kernels
    return [f for f in k.findings if f.severity == "error" and f.verdict != Verdict.VERIFIED]


def test_gemm_written_with_helpers_verifies_and_simulates(ave):
    r = ave("check", GEMM)
    assert r.code == 0, r.out
    assert "VERIFIED  gemm_helpers" in r.out
    r = ave("simulate", GEMM)
    assert r.code == 0, r.out
    assert "the output matches the reference; every shadow check passed" in r.out


def test_the_same_helper_inlines_as_the_handwritten_kernel():
    """Inlining gives gemm_lds_mfma.ave's body, with per-call names: the same proofs."""
    mine = ave_decl.check(GEMM).kernels[0]
    hand = ave_decl.check(EXAMPLES / "gemm_lds_mfma.ave").kernels[0]
    assert sorted(f.invariant for f in mine.findings) == sorted(f.invariant for f in hand.findings)


def test_a_wrong_argument_is_reported_inside_the_helper_and_at_the_call(ave):
    r = ave("check", "--confirm", "--json", GEMM_BAD)
    assert r.code == 1
    (k,) = r.json()["kernels"]
    bad = {f["invariant"]: f for f in k["findings"] if f["verdict"] == "VIOLATION" and f["severity"] == "error"}
    assert set(bad) == {"ave/tag-assert", "ave/mma-k-pairing"}
    tag = bad["ave/tag-assert"]
    src = GEMM_BAD.read_text().splitlines()
    assert "assert_tag(a, b" in src[tag["location"]["line"] - 1]  # the line inside the helper
    (call,) = tag["location"]["called_from"]
    assert call["helper"] == "mma_step" and "acc = mma_step(a, b, acc)" in src[call["line"] - 1]
    assert tag["replay"]["confirmed"] is True
    # the message names the compared components (not two tuples that read like equal values)
    assert tag["message"].startswith("tag relation `ta[1] == tb[0]` fails: ta[1] = ")
    # the chain names the helper lines it went through and their calls
    chain = tag["counterexample"]["rhs"]["chain"]
    stores = [p for p in chain if p["kind"] == "store" and p["buffer"] == "b"]
    assert stores and stores[0]["location"]["called_from"][0]["helper"] == "load_b"
    assert "load_b(b, Bs, ks + (lane // 32) * 2" in src[stores[0]["location"]["called_from"][0]["line"] - 1]
    r = ave("check", GEMM_BAD)
    assert "(in helper 'mma_step' called at " in r.out


def test_two_calls_of_a_helper_are_two_sites():
    """Findings at one helper line from two calls get different fingerprints."""
    (k,) = ave_decl.check(GEMM).kernels
    stage = [f for f in k.findings if f.invariant == "ave/global-coalescing"]
    assert len(stage) == 2 and stage[0].location.line == stage[1].location.line
    assert stage[0].location.called_from != stage[1].location.called_from
    assert stage[0].fingerprint != stage[1].fingerprint


def test_per_call_register_tags_with_loop_captures(ave):
    r = ave("check", FRAGMENTS)
    assert r.code == 0, r.out
    r = ave("simulate", FRAGMENTS)
    assert r.code == 0, r.out
    assert "shadow [ave/register-round-trip]" in r.out
    report = ave_decl.check(FRAGMENTS_BAD, confirm=True)
    (bad,) = _errors(report)
    assert bad.invariant == "ave/register-round-trip" and bad.replay["confirmed"]
    assert bad.location.called_from[0]["helper"] == "load_frag"
    assert bad.location.called_from[0]["line"] == 22


def test_round_trip_keeps_the_helpers():
    text = GEMM.read_text()
    m = parse_text(text, str(GEMM))
    assert [h.name for h in m.helpers] == ["stage", "load_a", "load_b", "mma_step"]
    printed = printer.module(m)
    assert printed.count("@device\n") == 4 and "return mfma_f32_32x32x8_bf16(a, b, acc)" in printed
    assert parse_text(printed) == m
    # the kernel is inlined: no call of a helper is left, and each call has its own loop variable
    body = printer.kernel(m.kernels[0])
    assert "stage(" not in body and "e_stage_1" in body and "e_stage_2" in body


def test_arguments_are_evaluated_once_at_the_call():
    src = """
@device
def put(dst, i, x):
    dst[i] = x
    dst[i + 1] = x

@kernel(grid=(1,), block=64, wave=64)
def k(A: Tensor[f32, (128,)], C: Tensor[f32, (128,)]):
    put(C, 2 * lane_id(), A[2 * lane_id()] * 2.0)
"""
    body = parse_text(src).kernels[0].body
    assert isinstance(body[0], A.Assign) and body[0].target.id == "i_put_1"
    assert isinstance(body[1], A.Assign) and body[1].target.id == "x_put_1"
    assert printer.expr(body[3].value) == "x_put_1"


BAD_HELPERS = {
    "arity": ("@device\ndef f(a):\n    pass\n", "    f(1, 2)\n", "takes 1 argument(s), 2 given"),
    "missing": ("@device\ndef f(a, b):\n    pass\n", "    f(1)\n", "missing argument(s): b"),
    "keyword": ("@device\ndef f(a):\n    pass\n", "    f(b=1)\n", "has no parameter 'b'"),
    "twice": ("@device\ndef f(a):\n    pass\n", "    f(1, a=2)\n", "got two values for parameter 'a'"),
    "recursion": ("@device\ndef f(a):\n    g(a)\n\n@device\ndef g(a):\n    f(a)\n", "    f(1)\n",
                  "calls itself (f -> g -> f)"),
    "return-not-last": ("@device\ndef f(a):\n    return a\n    pass\n", "    f(1)\n", "last statement"),
    "return-value-in-kernel": ("", "    return 1\n", "a kernel returns no value"),
    "assigns-parameter": ("@device\ndef f(a):\n    a = 1\n", "    f(1)\n", "assigns to its parameter 'a'"),
    "free-name": ("@device\ndef f(a):\n    x = a + q\n", "    q = 1\n    f(1)\n", "name 'q' in helper 'f'"),
    "shadows-builtin": ("@device\ndef tag(a):\n    pass\n", "    pass\n", "would hide the built-in"),
    "defined-twice": ("@device\ndef f(a):\n    pass\n\n@device\ndef f(b):\n    pass\n", "    pass\n",
                      "defined twice"),
    "nested-call": ("@device\ndef f(a):\n    return a\n", "    x = f(1) + 1\n", "must be a statement of its own"),
    "no-value": ("@device\ndef f(a):\n    pass\n", "    x = f(1)\n", "returns no value"),
    "typed-parameter": ("@device\ndef f(a: int):\n    pass\n", "    pass\n", "takes no type"),
    "decorator-arguments": ("@device(inline=True)\ndef f(a):\n    pass\n", "    pass\n", "takes no arguments"),
}


@pytest.mark.parametrize("case", sorted(BAD_HELPERS))
def test_bad_helpers_are_located_front_end_errors(case, tmp_path, ave):
    helpers, body, words = BAD_HELPERS[case]
    path = tmp_path / f"{case}.ave"
    text = front_end_error(ave, path, f"{helpers}\n{ONE_WAVE}{body}")
    assert words in text, (case, text)
    assert text.startswith(f"{path}:") and "Traceback" not in text


def test_an_error_inside_a_helper_names_the_call(tmp_path, ave):
    path = tmp_path / "k.ave"
    first = front_end_error(ave, path, f"@device\ndef f(dst):\n    dst[0] = nothing[0]\n\n{ONE_WAVE}    f(A)\n")
    first = first.splitlines()[0]
    assert first.startswith(f"{path}:3:") and first.endswith(f"(in helper 'f' called at {path}:7:5)")


def test_a_kernel_parameter_needs_a_type(tmp_path, ave):
    out = front_end_error(ave, tmp_path / "k.ave", "@kernel(grid=(1,), block=64, wave=64)\ndef k(A):\n    pass\n")
    assert "kernel parameter 'A' needs a type" in out


def test_an_exponential_expansion_is_refused_before_it_is_built():
    helpers = "@device\ndef h0(a):\n    a[0] = 1.0\n" + "".join(
        f"\n@device\ndef h{i}(a):\n    h{i - 1}(a)\n    h{i - 1}(a)\n" for i in range(1, 16))
    src = helpers + "\n@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64,)]):\n    h15(A)\n"
    with pytest.raises(FrontEndError, match=f"more than {MAX_INLINED_STATEMENTS} statements"):
        parse_text(src)
