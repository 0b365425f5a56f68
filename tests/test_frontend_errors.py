"""Bad kernels: a one-line `file:line:col: error:` message, a snippet with a caret, exit code 3."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

HEAD = "@kernel(grid=(N // 64,), block=64, wave=64)\ndef k(X: Tensor[f32, (N,)], Y: Tensor[f32, (N, N)]):\n"

BAD = {
    "missing_colon": ("@kernel(grid=(1,), block=64)\ndef k(X: Tensor[f32, (N,)])\n    pass\n", 2, "invalid syntax"),
    "bad_character": (HEAD + "    t = thread_id(0) $ 2\n", 3, "unexpected character"),
    "undefined_name": (HEAD + "    t = thread_id(0) + foo\n", 3, "undefined name 'foo'"),
    "rank_mismatch": (HEAD + "    v = Y[thread_id(0)]\n", 3, "rank 2"),
    "tag_arity": (HEAD + "    tag(Y, lambda i: (i,), \"Y\")\n", 3, "takes 1 coordinate"),
    "builtin_arity": (HEAD + "    t = thread_id(0, 1)\n", 3, "takes 1 argument"),
    "unknown_module": ("from ave.foo import x\n" + HEAD + "    pass\n", 1, "unknown module 'ave.foo'"),
    "not_imported": (HEAD.replace("wave=64", "wave=64") + "    a = local(bf16, (4,))\n"
                     "    c = local(f32, (16,))\n    c = mfma_f32_32x32x8_bf16(a, a, c)\n", 5, "is not imported"),
    "mma_operand_size": ("from ave.amdgpu import mfma_f32_32x32x8_bf16\n" + HEAD + "    a = local(bf16, (8,))\n"
                         "    c = local(f32, (16,))\n    c = mfma_f32_32x32x8_bf16(a, a, c)\n", 6, "holds 4 values"),
    "unknown_dtype": ("@kernel(grid=(1,), block=64)\ndef k(X: Tensor[f99, (N,)]):\n    pass\n", 2,
                      "unknown element type"),
    "bad_dedent": (HEAD + "    for i in range(4):\n        t = i\n      u = 1\n", 5, "indent"),
    "missing_grid": ("@kernel(block=64)\ndef k(X: Tensor[f32, (N,)]):\n    pass\n", 1, "needs grid= and block="),
    "store_to_index": (HEAD + "    t = thread_id(0)\n    t[0] = X[t]\n", 4, "is not a tensor or buffer"),
    "symbolic_step": (HEAD + "    for i in range(0, N, N):\n        pass\n", 3, "positive constant"),
    "no_kernel": ("# nothing here\n", 1, "defines no kernel"),
    "unterminated_string": (HEAD + "    tag(X, lambda i: (i,), \"X)\n", 3, "unexpected character"),
    "assert_tag_lambda": (HEAD + "    assert_tag(X[0], X[1], lambda a: a[0] == 0)\n", 3, "two-parameter lambda"),
    "layout_size": (HEAD + "    s = shared(f32, (8, 8), layout=row_major(4, 8))\n", 3, "has 32 elements"),
    "duplicate_tag": (HEAD + "    tag(X, lambda i: (i,), \"X\")\n    tag(X, lambda i: (i,), \"X2\")\n", 4,
                      "already has a tag binding"),
    "swizzle_params": (HEAD + "    s = shared(f32, (8, 8), layout=swizzle(3, 0, 1) @ row_major(8, 8))\n", 3,
                       "|S| >= B"),
    "index_reassigned_in_loop": (HEAD + "    j = 0\n    for i in range(4):\n        j = i + 1\n", 5,
                                 "reassigned inside a loop"),
    "data_as_index": (HEAD + "    v = X[0]\n    w = X[v]\n", 4, "must be an integer expression"),
    # where the bracket opens, not at the next statement (line ends do not count inside brackets)
    "unclosed_paren": (HEAD + "    t = thread_id(0\n    X[t] = 1.0\n", 3, "'(' was never closed"),
    "unclosed_subscript": (HEAD + "    t = thread_id(0)\n    X[t = 1.0\n", 4, "'[' was never closed"),
    # on the indented line, not at the end of the line before it
    "unexpected_indent": (HEAD + "    t = thread_id(0)\n        X[t] = 1.0\n", 4, "unexpected indent"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_kernel(name, tmp_path, ave):
    text, line, fragment = BAD[name]
    path = tmp_path / f"{name}.ave"
    path.write_text(text)
    r = ave("check", path)
    assert r.code == 3, (r.out, r.err)
    first = r.out.splitlines()[0]
    m = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): error: (.*)$", first)
    assert m, first
    assert int(m.group(1)) == line, first
    assert fragment in m.group(3), first
    assert "^" in r.out  # snippet with caret
    assert "Traceback" not in r.out + r.err


def test_not_utf8(tmp_path, ave):
    path = tmp_path / "latin1.ave"
    path.write_bytes(b"# caf\xe9\n")
    r = ave("check", path)
    assert r.code == 3
    assert r.out.startswith(f"{path}:1:6: error: file is not valid UTF-8")


def test_missing_file_is_usage_error(tmp_path, ave):
    r = ave("check", tmp_path / "nope.ave")
    assert r.code == 2
    assert "cannot read" in r.out


def test_no_traceback_from_real_process(tmp_path):
    path = tmp_path / "bad.ave"
    path.write_text(BAD["rank_mismatch"][0])
    proc = subprocess.run([sys.executable, "-m", "ave_decl.cli", "check", str(path)], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"{path}:3:")


def test_usage_error_exit_code(ave):
    r = ave("check", "--engine", "nope", "x.ave")
    assert r.code == 2


def _first_line(ave, tmp_path, text: str) -> tuple[str, str]:
    """(the file's path, the first line `ave check` prints for `text`)."""
    path = tmp_path / "k.ave"
    path.write_text(text)
    return str(path), ave("check", path).out.splitlines()[0]


@pytest.mark.parametrize("name, col", [("unclosed_paren", 18), ("unclosed_subscript", 6), ("unexpected_indent", 9)])
def test_syntax_errors_point_at_their_cause(name, col, tmp_path, ave):
    """The column too: the open bracket, the first character of the over-indented line."""
    text, line, _fragment = BAD[name]
    path, first = _first_line(ave, tmp_path, text)
    assert first.startswith(f"{path}:{line}:{col}: error: "), first


def test_a_bracket_closed_later_is_not_called_unclosed(tmp_path, ave):
    """A syntax error inside brackets that do close is reported where it is."""
    path, first = _first_line(ave, tmp_path, HEAD + "    t = thread_id(0)\n    X[t] = (1.0 +\n        2.0 3.0)\n")
    assert first.startswith(f"{path}:5:13: error: invalid syntax: unexpected '3.0'"), first


def test_a_dedent_at_the_end_of_the_file_points_at_the_last_line(tmp_path, ave):
    """No line follows it to point at: the error stays on the `for` that needs a body."""
    path, first = _first_line(ave, tmp_path, HEAD + "    for i in range(4):\n\n")
    assert first.startswith(f"{path}:3:23: error: invalid syntax: unexpected dedent"), first


def test_a_string_left_open_is_not_an_unclosed_bracket(tmp_path, ave):
    """The tokenizer stops at a triple-quoted string that never ends: no bracket is named."""
    path, first = _first_line(ave, tmp_path, HEAD + "    t = thread_id(0)\n    X[t] = (\'\'\' 1 \') + 1.0\n")
    assert "never closed" not in first and first.startswith(f"{path}:4:"), first
