"""Issue 20, the simulator's inputs: the reference language (never Python), no eval/exec in the
package, `ave simulate` choosing its own sizes, refusing sizes that do not fit in memory, saying
when only the shadow check failed, and keeping numpy warnings off stderr."""
from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

from ave_decl.lang import reference as R
from ave_decl.lang.errors import ExitCode, FrontEndError
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile, Span
from ave_decl.sim.reference import attention_reference, evaluate_reference, moe_reference
from ave_decl.sim.run import simulate_source
from ave_decl.sim.state import SimulationError, map_values, slot_maps

PACKAGE = Path(__file__).resolve().parent.parent / "ave_decl"
NAIVE = (EXAMPLES / "gemm_naive.ave").read_text()
HOSTILE = "C = A @ B + 0 * np.f2py.os.system('touch {sentinel}')"


# --------------------------------------------------------------------------- no code execution
def test_the_package_calls_no_eval_exec_compile_or_import():
    """Walks every module's AST: no call of the builtins eval, exec, compile, __import__ (a method
    such as `re.compile(...)` is an attribute call and fine)."""
    banned = {"eval", "exec", "compile", "__import__"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in banned:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {f.id}(...)")
            if isinstance(f, ast.Attribute) and f.attr in banned and isinstance(f.value, ast.Name) \
                    and f.value.id in ("builtins", "__builtins__"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: builtins.{f.attr}(...)")
    assert not found, found


def _hostile_kernel(tmp_path: Path) -> tuple[Path, Path]:
    sentinel = tmp_path / "pwned"
    path = tmp_path / "hostile.ave"
    path.write_text(NAIVE.replace('reference="C = A @ B"', 'reference="' + HOSTILE.format(sentinel=sentinel) + '"'))
    return path, sentinel


def test_hostile_reference_is_refused_by_check_and_simulate_and_nothing_runs(ave, tmp_path):
    path, sentinel = _hostile_kernel(tmp_path)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "reference=" in t)
    col = path.read_text().splitlines()[line - 1].index("np.f2py") + len("np") + 1  # the '.' after np
    checked = ave("check", path)
    assert checked.code == ExitCode.FRONT_END, checked.out
    assert f"{path}:{line}:{col}: error: reference: attribute access" in checked.out
    as_json = ave("check", "--json", path)
    assert as_json.code == ExitCode.FRONT_END
    (err,) = as_json.json()["errors"]
    assert err["kind"] == "front-end" and err["location"]["line"] == line and err["location"]["col"] == col
    simulated = ave("simulate", path, "--sizes", "M=16,N=16,K=8")
    assert simulated.code == ExitCode.FRONT_END, simulated.out
    assert f"{path}:{line}:{col}: error: reference: attribute access" in simulated.out
    unsized = ave("simulate", path)  # the size search must not run first either
    assert unsized.code == ExitCode.FRONT_END
    assert not sentinel.exists()
    with pytest.raises(FrontEndError):  # the library entry point refuses it too, before simulating
        simulate_source(SourceFile.read(path), dict(M=16, N=16, K=8))
    assert not sentinel.exists()


NAMES = {"A": R.TENSOR, "B": R.TENSOR, "C": R.TENSOR, "ids": R.TENSOR, "M": R.NUMBER}


def _parse(text: str) -> R.Reference:
    return R.parse_reference(text, Span("k.ave", 3, 10, 3, 10 + len(text) + 2), NAMES)


@pytest.mark.parametrize("text, at, words", [
    ("C = __import__('os').system('x')", "'os'", "strings are not part"),
    ("C = A.T", ".T", "attribute access"),
    ("C = eval(A)", "eval", "unknown function 'eval'"),
    ("C = exec(A)", "exec", "unknown function 'exec'"),
    ("C = open(A)", "open", "unknown function 'open'"),
    ("C = (A)(B)", "(B", "only a listed function can be called"),
    ("C = np", "np", "unknown name 'np'"),
    ("C = lambda: A", ":", "invalid syntax"),
    ("C = A @ M", "M", "@ multiplies two tensors"),
    ("M = A", "M", "not a tensor parameter"),
    ("C = max(A, B)", "B)", "maximum(x, y)"),
    ("C = A[1:B]", "B]", "a slice bound is a number"),
    ("C = 1", "1", "must compute a tensor"),
    ("C = A; A", ";", "unexpected character ';'"),
    ("C = 123456789012345678901234567890 * A", "1234", "too large"),
])
def test_reference_errors_point_into_the_string(text, at, words):
    """The literal's opening quote is at column 10: text index i is file column 11 + i."""
    with pytest.raises(FrontEndError) as info:
        _parse(text)
    assert (info.value.span.line, info.value.span.col) == (3, 11 + text.index(at)), info.value.one_line()
    assert words in info.value.message and info.value.exit_code == ExitCode.FRONT_END
    assert len(info.value.one_line()) < 300


def test_reference_bounds_length_and_nesting():
    for text in ("C = " + "A + " * 400 + "A", "C = " + "-" * 200 + "A", "C = " + "exp(" * 70 + "A" + ")" * 70):
        with pytest.raises(FrontEndError) as info:
            _parse(text)
        assert "too long" in info.value.message or "nested too deeply" in info.value.message
        assert len(info.value.one_line()) < 200


def test_reference_with_escapes_points_at_the_literal():
    """Escapes make the string differ from its source text: the error names the whole literal."""
    literal = Span("k.ave", 3, 10, 3, 10 + len("C = A\\t.T") + 2)
    with pytest.raises(FrontEndError) as info:
        R.parse_reference("C = A\t.T", literal, NAMES)
    assert info.value.span == literal


def test_reference_ast_is_typed():
    ref = _parse("C = sum(exp(A) * M, axis=1, keepdims=True) - A[ids, 0:M:2] + transpose(B, (1, 0))")
    assert ref.output == "C" and ref.expr.type == R.TENSOR
    call = ref.expr.left.left
    assert isinstance(call, R.Call) and call.func == "sum" and call.args[1].value == 1 and call.args[2].value is True
    assert call.args[0].right.type == R.NUMBER  # M is a size
    index = ref.expr.left.right
    assert isinstance(index, R.Index) and isinstance(index.items[1], R.Slice)


def _inputs(**shapes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


def _eval(text: str, names: dict[str, str], inputs: dict, sizes: dict | None = None) -> np.ndarray:
    ref = R.parse_reference(text, Span("k.ave", 1, 1, 1, len(text) + 3), names)
    return evaluate_reference(ref, inputs, sizes or {})


def test_example_references_give_the_numpy_results():
    """The references the examples and generators use, against the same numpy computations."""
    x = _inputs(A=(16, 8), B=(8, 12), C=(16, 12))
    f64 = {k: v.astype(np.float64) for k, v in x.items()}
    out = _eval("C = A @ B", {k: R.TENSOR for k in x}, x)
    assert np.array_equal(out, f64["A"] @ f64["B"])
    att = _inputs(Q=(4, 32, 32), K=(1, 32, 32), V=(1, 32, 32), O=(4, 32, 32))
    a64 = [att[k].astype(np.float64) for k in "QKV"]
    for causal in (True, False):
        got = _eval(f"O = attention(Q, K, V, causal={causal})", {k: R.TENSOR for k in att}, att)
        assert np.array_equal(got, attention_reference(*a64, causal=causal))
    rng = np.random.default_rng(3)
    moe = _inputs(X=(16, 64), W=(2, 64, 32), weights=(32,), Y=(32, 32))
    moe["sorted_ids"] = rng.permutation(32).astype(np.float32)
    moe["expert_ids"] = np.array([1.0], np.float32)
    got = _eval("Y = moe(X, W, sorted_ids, expert_ids, weights, 2)", {k: R.TENSOR for k in moe}, moe)
    m64 = {k: v.astype(np.float64) for k, v in moe.items()}
    want = moe_reference(m64["X"], m64["W"], m64["sorted_ids"], m64["expert_ids"], m64["weights"], 2)
    assert np.array_equal(got, want)


def test_elementwise_reductions_transposes_and_gathers():
    x = _inputs(A=(5, 7), C=(7, 5))
    x["ids"] = np.array([4, 0, 2], np.float32)
    a = x["A"].astype(np.float64)
    names = {"A": R.TENSOR, "C": R.TENSOR, "ids": R.TENSOR, "M": R.NUMBER}
    cases = {
        "C = exp(A) * 2 - max(A, axis=1, keepdims=True) / 3": np.exp(a) * 2 - np.max(a, axis=1, keepdims=True) / 3,
        "C = -A ** 2 + exp2(A) - M": -a ** 2 + np.exp2(a) - 5,
        "C = transpose(A) @ A": a.T @ a,
        "C = softmax(A, axis=1)": np.exp(a - a.max(1, keepdims=True)) / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True),
        "C = sum(A, 0) + mean(A, axis=(0, 1))": a.sum(0) + a.mean(axis=(0, 1)),
        "C = A[ids, 1:M] * A[ids][:, 0:M - 1]": a[[4, 0, 2], 1:5] * a[[4, 0, 2]][:, 0:4],
        "C = where(A > 0, A, 0.5 * A) + maximum(A, 0)": np.where(a > 0, a, 0.5 * a) + np.maximum(a, 0),
    }
    for text, want in cases.items():
        assert np.allclose(_eval(text, names, x, {"M": 5}), want, rtol=1e-12, atol=0), text


def test_reference_that_cannot_be_evaluated_at_these_sizes_is_a_located_error():
    x = _inputs(A=(4, 3), C=(4, 4))
    with pytest.raises(SimulationError) as info:
        _eval("C = A @ A", {"A": R.TENSOR, "C": R.TENSOR}, x)
    assert info.value.span.col == 6 and "cannot evaluate" in info.value.message  # "A @ A", after "C = "


def test_every_declared_reference_parses():
    from ave_decl.transform import gemm_templates

    texts = [p.read_text() for p in sorted(EXAMPLES.glob("*.ave"))]
    texts += [gemm_templates.NAIVE]
    seen = 0
    for text in texts:
        for k in parse_source(SourceFile("x.ave", text)).kernels:
            ref = R.reference_of(k)
            seen += ref is not None
    assert seen >= 9


def test_operand_maps_are_walked_not_evaluated():
    """The instruction library's maps, evaluated by walking their parsed expression."""
    lane, v = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    env = {"lane": lane, "v": v}
    assert np.array_equal(map_values("8 * (v // 4) + 4 * (lane // 32) + v % 4", env),
                          8 * (v // 4) + 4 * (lane // 32) + v % 4)
    assert np.array_equal(map_values("(lane ^ 3) & 7 | (v << 1) >> 1", env), (lane ^ 3) & 7 | (v << 1) >> 1)
    from ave_decl.hw.instructions import OperandMap

    rows, cols = slot_maps(OperandMap(4, "lane // 4 + 8 * (v // 2)", "2 * (lane % 4) + v % 2"), 32)
    assert rows.shape == (32, 4) and rows[5, 3] == 5 // 4 + 8 and cols[5, 3] == 2 * 1 + 1


# ------------------------------------------------------------------ sizes: chosen, refused
def test_smallest_sizes_meet_assume_and_the_launch():
    from ave_decl.solver.sizes import complete_sizes

    def pick(name, given=None):
        (plan,) = complete_sizes(SourceFile.read(EXAMPLES / f"{name}.ave"), given or {})
        return plan.sizes, plan.chosen

    assert pick("gemm_naive") == ({"M": 16, "K": 1, "N": 16}, ["M", "K", "N"])
    assert pick("gemm_lds_mfma")[0] == {"M": 64, "K": 64, "N": 64}
    assert pick("flash_attention_gqa")[0] == {"H": 4, "S": 32, "HKV": 1}
    assert pick("fused_moe")[0] == {"T": 16, "E": 1, "N": 32, "EM": 32, "EB": 1}
    assert pick("gemm_naive", {"M": 48}) == ({"M": 48, "K": 1, "N": 16}, ["K", "N"])
    assert pick("gemm_naive", {"M": 16, "N": 16, "K": 3}) == ({"M": 16, "N": 16, "K": 3}, [])
    with pytest.raises(FrontEndError) as info:
        pick("gemm_naive", {"M": 30})
    assert info.value.exit_code == ExitCode.FRONT_END and "with M=30" in info.value.message


def test_simulate_without_sizes_picks_prints_and_runs(ave):
    r = ave("simulate", EXAMPLES / "gemm_naive.ave", "--json")
    assert r.code == 0, r.out
    (k,) = r.json()["kernels"]
    assert k["sizes"] == {"M": 16, "K": 1, "N": 16} and k["chosen_sizes"] == ["M", "K", "N"] and k["status"] == "ok"
    text = ave("simulate", EXAMPLES / "gemm_naive.ave", "--sizes", "M=32", "--no-shadow")
    assert text.code == 0 and text.out.startswith("OK        gemm_naive at M=32, K=1, N=16")
    assert "  sizes: K=1, N=16 chosen" in text.out


@pytest.mark.parametrize("sizes, code, words", [
    ("M=160000000,N=160000,K=8", ExitCode.USAGE, "needs at least 1,228,820,500,480,000 bytes"),
    ("M=-16,N=16,K=8", ExitCode.USAGE, "size M=-16 is negative"),
    ("M=16,N=16,K=100000000000000000000", ExitCode.USAGE, "does not fit the simulator's 32-bit indices"),
    ("M=0,N=16,K=8", ExitCode.FRONT_END, "gemm_naive.ave:5:14: error: the grid (0, 1) is empty"),
])
def test_simulate_refuses_sizes_it_cannot_run_up_front(ave, sizes, code, words):
    r = ave("simulate", EXAMPLES / "gemm_naive.ave", "--sizes", sizes)
    assert r.code == code and words in r.out, r.out
    assert "internal error" not in r.out + r.err and len(r.out.strip().splitlines()[0]) < 400


def test_memory_limit_is_overridable(ave, monkeypatch):
    args = ("simulate", EXAMPLES / "gemm_naive.ave", "--sizes", "M=1600,N=1600,K=8")
    r = ave(*args, "--max-memory", "0.01")
    assert r.code == ExitCode.USAGE and "over the limit of 10.2 MiB" in r.out
    monkeypatch.setenv("AVE_SIM_MAX_MEMORY", "0.001")
    small = ave("simulate", EXAMPLES / "gemm_naive.ave", "--sizes", "M=160,N=160,K=8", "--no-shadow")
    assert small.code == ExitCode.USAGE and "AVE_SIM_MAX_MEMORY" in small.out
    for bad in ("nan", "inf", "-1", "0", "lots"):
        assert ave(*args, "--max-memory", bad).code == ExitCode.USAGE


# ------------------------------------------------------------------ what a failure says
def test_matching_output_with_a_failed_shadow_check_says_so(ave, tmp_path):
    path = tmp_path / "wrong_assertion.ave"
    path.write_text(NAIVE.replace("ta[1] == tb[0]", "ta[0] == tb[1]"))
    r = ave("simulate", path, "--sizes", "M=16,N=16,K=8")
    assert r.code == 1
    assert r.out.startswith("SHADOW    gemm_naive at M=16, N=16, K=8")
    assert "  = the output matches the reference, but 1 shadow check(s) failed: ave/tag-assert at line 16" in r.out
    (k,) = ave("simulate", path, "--sizes", "M=16,N=16,K=8", "--json").json()["kernels"]
    assert k["status"] == "shadow-failed" and k["reference"]["ok"] and not k["ok"]
    assert k["summary"].startswith("the output matches the reference, but 1 shadow check(s) failed")


def test_simulate_json_has_no_nan(ave, tmp_path):
    path = tmp_path / "overflow.ave"
    path.write_text(NAIVE.replace("acc += a * b", "acc += a * b * 1e30 * 1e30"))
    r = ave("simulate", path, "--sizes", "M=16,N=16,K=8", "--json", "--no-shadow")
    assert r.code == 1
    json.loads(r.out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


def test_numpy_warnings_do_not_leak_from_a_simulation():
    """Out-of-range casts to f16 and an overflowing output: inf/nan are results, not warnings."""
    text = NAIVE.replace("acc += a * b", "acc += cast(a * b * 1e30, f16)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ((_, r),) = simulate_source(SourceFile("cast.ave", text), dict(M=16, N=16, K=8), shadow=False)
    assert not r.reference["ok"]


def test_simulate_a_file_without_kernels_or_with_an_unknown_kernel(ave, tmp_path):
    empty = tmp_path / "empty.ave"
    empty.write_text("# nothing here\n")
    r = ave("simulate", empty)
    assert r.code == ExitCode.FRONT_END and f"{empty}:1:1: error: the file defines no kernel" in r.out
    unknown = ave("simulate", EXAMPLES / "gemm_naive.ave", "--kernel", "nope")
    assert unknown.code == ExitCode.USAGE and "has no kernel named 'nope'" in unknown.out


# --------------------------------------------------------------------------- tolerance=
@pytest.mark.parametrize("value, words", [
    ('"0.01"', "tolerance= takes a number above 0 and at most 0.1"),
    ("0", "tolerance= takes a number above 0 and at most 0.1"),
    ("0.5", "tolerance= takes a number above 0 and at most 0.1"),
    ("True", "tolerance= takes a number above 0 and at most 0.1"),
])
def test_a_bad_tolerance_is_a_located_front_end_error(ave, tmp_path, value, words):
    from conftest import front_end_error

    text = NAIVE.replace('reference="C = A @ B"', f'reference="C = A @ B", tolerance={value}')
    out = front_end_error(ave, tmp_path / "k.ave", text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "tolerance=" in t)
    col = text.splitlines()[line - 1].index("tolerance=") + len("tolerance=") + 1
    assert f"k.ave:{line}:{col}: error: {words}" in out, out


def test_a_tolerance_needs_a_reference(ave, tmp_path):
    from conftest import front_end_error

    text = NAIVE.replace('reference="C = A @ B"', "tolerance=0.01")
    assert "tolerance= bounds the error against reference=: give a reference" in front_end_error(
        ave, tmp_path / "k.ave", text)


def test_the_tolerance_bounds_the_comparison():
    """A kernel that rounds its result to bf16 on the way misses 1e-3 and meets its tolerance=."""
    assert "    C[m, n] = acc\n" in NAIVE
    rounded = NAIVE.replace("    C[m, n] = acc\n", "    C[m, n] = cast(acc, bf16)\n")
    sizes = {"M": 32, "N": 32, "K": 64}
    strict = simulate_source(SourceFile("k.ave", rounded), sizes, shadow=False)[0][1].reference
    assert not strict["ok"] and strict["tol"] == 1e-3 and strict["rel"] > 1e-3, strict
    loose = rounded.replace('reference="C = A @ B"', 'reference="C = A @ B", tolerance=0.01')
    met = simulate_source(SourceFile("k.ave", loose), sizes, shadow=False)[0][1].reference
    assert met["ok"] and met["tol"] == 0.01 and met["rel"] == strict["rel"], met


# ------------------------------------------------------------ a reference of the wrong shape
def test_a_reference_of_the_wrong_shape_is_a_located_error_in_run_and_simulate(ave, tmp_path):
    """`sum(A @ B, axis=0)` is a vector where C is a matrix: the reference is at fault, so `ave run`
    and `ave simulate` say so at the expression (exit 3; `run` once died on a KeyError, exit 70),
    and `check --confirm` still replays a violation (a replay compares no reference)."""
    text = NAIVE.replace('reference="C = A @ B"', 'reference="C = sum(A @ B, axis=0)"')
    path = tmp_path / "wrong_shape.ave"
    path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "reference=" in t)
    col = text.splitlines()[line - 1].index("sum(") + 1
    want = (f"{path}:{line}:{col}: error: reference: the expression has shape (16,), but C has shape (16, 16) "
            "at these sizes")
    for command in (("run",), ("run", "--json"), ("simulate",), ("simulate", "--json")):
        r = ave(*command, path, "--sizes", "M=16,N=16,K=8")
        assert r.code == ExitCode.FRONT_END, (command, r.out, r.err)
        assert (r.out + r.err).startswith(want) and "Traceback" not in r.out + r.err, (command, r.out, r.err)
    violating = tmp_path / "wrong_shape_violation.ave"
    violating.write_text(text.replace("ta[1] == tb[0]", "ta[0] == tb[1]"))
    confirmed = ave("check", "--confirm", violating)
    assert confirmed.code == ExitCode.VIOLATION, confirmed.out
    assert "confirmed by replay" in confirmed.out and "NOT confirmed" not in confirmed.out, confirmed.out
