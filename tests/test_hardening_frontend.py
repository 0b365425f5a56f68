"""Hardening of the front end and the command-line inputs (issue 20): every bad input is a
one-line error with its exit code (and `file:line:col` where a kernel construct is at fault),
never exit 70, never a traceback, never a hang; good inputs in odd encodings are accepted.

Each test here failed before its fix (exit 70, a hang, exit 0 on a bad launch, a rejected
line ending, a 100 KB message, a RuntimeWarning on stderr)."""
from __future__ import annotations

import ast as pyast
import os
import re
import subprocess
import sys

import pytest
from conftest import EXAMPLES, ROOT

from ave_decl.lang.depth import MAX_NESTING
from ave_decl.lang.source import MAX_SOURCE_BYTES

HEAD = "@kernel(grid=(N // 64,), block=64, wave=64)\ndef k(X: Tensor[f32, (N,)], Y: Tensor[f32, (N,)]):\n"
GOOD = EXAMPLES / "gemm_naive.ave"


def located(r, path, line: int | None = None, fragment: str = "") -> str:
    """The first output line is `path:line:col: error: ...` (exit 3); returns the message."""
    assert r.code == 3, (r.code, r.out[:2000], r.err[:2000])
    first = r.out.splitlines()[0]
    m = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): error: (.*)$", first)
    assert m, first[:500]
    if line is not None:
        assert int(m.group(1)) == line, first[:500]
    assert fragment in m.group(3), first[:500]
    assert "Traceback" not in r.out + r.err and "internal error" not in r.out
    return m.group(3)


def check_text(ave, tmp_path, text: str, name: str = "k.ave", *args: str):
    path = tmp_path / name
    path.write_text(text)
    return path, ave("check", "--no-violation-sets", *args, path)


# ------------------------------------------------------------- 1. durations
@pytest.mark.parametrize("command, option", [("check", "--timeout"), ("check", "--engine-timeout"),
                                             ("audit", "--timeout"), ("audit", "--file-timeout")])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "0", "-1", "NaN", "ten"])
def test_duration_options_reject_non_finite_and_huge(ave, command, option, value):
    r = ave(command, option, value, GOOD)
    assert r.code == 2, (r.code, r.out, r.err)
    assert f"Invalid value for '{option}'" in r.err and "Traceback" not in r.out + r.err


def test_duration_options_accept_ordinary_seconds(ave):
    r = ave("check", "--timeout", "30", "--engine-timeout", "600", "--no-violation-sets", GOOD)
    assert r.code == 0, r.out


# ------------------------------------------------- 2. names escaping their loop
ESCAPES = {
    "derived_index_after_loop": (HEAD + "    for i in range(4):\n        j = i * 2\n    X[j] = X[0]\n", 5,
                                 "index name 'j' depends on the loop variable 'i' of the loop at"),
    "loop_variable_after_loop": (HEAD + "    for i in range(4):\n        pass\n    X[i] = X[0]\n", 5,
                                 "loop variable 'i' is used after its loop"),
    "assume_over_loop_variable": (HEAD + "    for i in range(4):\n        assume(N > i)\n", 4,
                                  "assume() constrains sizes only; this condition depends on a loop variable"),
    "assume_over_thread_id": (HEAD + "    t = thread_id(0)\n    assume(t < 32)\n", 4,
                              "depends on thread_id(0)"),
    "tag_over_loop_variable": (HEAD + "    for i in range(4):\n        tag(X, lambda m: (m + i,), \"X\", i)\n"
                               "    Y[thread_id(0)] = X[thread_id(0)]\n", 4, "cannot depend on a loop variable"),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_names_escaping_their_loop_are_front_end_errors(ave, tmp_path, name):
    text, line, fragment = ESCAPES[name]
    path, r = check_text(ave, tmp_path, text)
    message = located(r, path, line, fragment)
    if name == "derived_index_after_loop":
        assert f"{path}:3:5" in message  # where the loop is


def test_loop_local_names_inside_the_loop_and_invariant_names_after_it_still_work(ave, tmp_path):
    text = HEAD + ("    t = thread_id(0)\n    for i in range(4):\n        j = i * 64 + t\n        c = t * 2\n"
                   "        Y[j % N] = X[j % N]\n    X[c % N] = Y[0]\n")
    _, r = check_text(ave, tmp_path, text)
    assert r.code in (0, 1), r.out  # a verdict, not an error


# ------------------------------------------------------------ 3. deep nesting
def nested_ifs(levels: int, indent: str = " ") -> str:
    body = "".join(indent * (d + 1) + f"if N > {d}:\n" for d in range(levels))
    return HEAD.replace("    ", indent) + body + indent * (levels + 1) + "pass\n"


DEEP = {
    "nested_ifs": (nested_ifs(300), "kernel is nested too deeply"),
    "thousand_nested_ifs": (nested_ifs(1000, "\t"), "a kernel file may have at most"),  # the size bound first
    "elif_chain": (HEAD + "    if N > 0:\n        pass\n" + "".join(f"    elif N > {d}:\n        pass\n"
                                                               for d in range(1, 1000)), "kernel is nested too deeply"),
    "operator_chain": (HEAD + "    t = thread_id(0)\n    X[" + " + ".join(["t"] * 2000) + "] = X[0]\n",
                       "kernel is nested too deeply"),
    "nested_calls": (HEAD + "    t = thread_id(0)\n    X[" + "min(t, " * 500 + "t" + ")" * 500 + "] = X[0]\n",
                     "kernel is nested too deeply"),
    "nested_subscripts": (HEAD.replace("Y: Tensor[f32, (N,)]", "ids: Tensor[i32, (N,), permutation]") +
                          "    X[" + "ids[" * 500 + "0" + "]" * 500 + "] = X[0]\n", "kernel is nested too deeply"),
    "deep_index_dag": (HEAD + "    t = thread_id(0)\n" + "    t = t + 1\n" * 1000 + "    X[t] = X[0]\n",
                       "index expression is nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_input_is_a_located_front_end_error(ave, tmp_path, name):
    text, fragment = DEEP[name]
    path, r = check_text(ave, tmp_path, text)
    located(r, path, None, fragment)


def at_limit_kernels() -> dict[str, str]:
    """Kernels exactly MAX_NESTING levels deep in each direction (statement nesting, operator
    chains, nested index-tensor reads, nested calls) and an index DAG at its depth bound."""
    head = HEAD.replace("Y: Tensor[f32, (N,)]", "Y: Tensor[f32, (N,)], ids: Tensor[i32, (N,), permutation]")
    n = MAX_NESTING - 3
    ifs = "".join(" " * (d + 1) + f"if N > {d}:\n" for d in range(n)) + " " * (n + 1) + "Y[t] = X[t]\n"
    return {
        "ifs": head.replace("    ", " ") + " t = thread_id(0)\n" + ifs,
        "chain": head + "    t = thread_id(0)\n    Y[t] = X[" + " + ".join(["t"] * n) + f" - {n - 1} * t]\n",
        "subscripts": head + "    t = thread_id(0)\n    Y[t] = X[" + "ids[" * n + "t" + "]" * n + "]\n",
        "calls": head + "    t = thread_id(0)\n    Y[t] = X[" + "min(t, " * n + "t" + ")" * n + "]\n",
        "dag": head + "    t = thread_id(0) + 0 * N\n" + "    t = t + 1\n" * 90 + "    Y[t % N] = X[t % N]\n",
    }


@pytest.mark.parametrize("name", sorted(at_limit_kernels()))
def test_kernels_at_the_nesting_bound_check_print_and_simulate(ave, tmp_path, name):
    from ave_decl.lang import printer
    from ave_decl.lang.parser import parse_text

    text = at_limit_kernels()[name]
    path, r = check_text(ave, tmp_path, text)
    assert r.code in (0, 1), r.out[:3000]
    module = parse_text(text)
    assert parse_text(printer.module(module)) == module
    s = ave("simulate", path, "--sizes", "N=64")
    assert s.code in (0, 1) and "Traceback" not in s.out + s.err, s.out[:3000]


# -------------------------------------------------------- 4. integer constants
CONSTANTS = {
    "huge_shift": ("    assume(N < (1 << 10000000))\n", 3, "out of range"),
    "shift_by_folded_huge_count": ("    assume(N < (1 << (1 << 30)))\n", 3, "out of range"),
    "huge_shift_literal": ("    assume(N < (1 << 10000000000))\n", 3, "does not fit in 32 bits"),
    "folded_product": ("    X[(1 << 40) * (1 << 40)] = X[0]\n", 3, "out of range"),
    "folded_past_32_bits": ("    X[65536 * 65536] = X[0]\n", 3, "constants must lie in [-2**31, 2**31)"),
    "negative_shift": ("    X[1 << -1] = X[0]\n", 3, "shift count -1 is out of range"),
    "symbolic_huge_shift": ("    X[thread_id(0) << 2000000000] = X[0]\n", 3, "shift count 2000000000"),
    "huge_literal": ("    X[" + "9" * 100_000 + "] = X[0]\n", 3, "is too large"),
    "division_by_zero": ("    X[thread_id(0) // 0] = X[0]\n", 3, "division by zero"),
    "remainder_by_zero": ("    X[thread_id(0) % 0] = X[0]\n", 3, "remainder by zero"),
    "huge_constant_dimension": ("    s = local(f32, (1000000, 1000000))\n", 3, "a buffer holds fewer than 2**31"),
    "huge_swizzle": ("    s = shared(f32, (8, 8), layout=swizzle(1000, 0, 1000) @ row_major(8, 8))\n", 3,
                     "B + M + |S| <= 31"),
    "bad_string_escape": ("    tag(X, lambda i: (i,), \"\\x\")\n", 3, "invalid string literal"),
}


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_out_of_range_constants_are_located_front_end_errors(ave, tmp_path, name):
    body, line, fragment = CONSTANTS[name]
    path, r = check_text(ave, tmp_path, HEAD + body)
    located(r, path, line, fragment)


# ---------------------------------------------- 5. files that are not regular
def run_real(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real `ave` process (a FIFO must not hang it: the timeout is far above a correct run)."""
    return subprocess.run([sys.executable, "-m", "ave_decl.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_directory_and_device_are_reported_and_the_batch_goes_on(tmp_path):
    fifo, folder, good = tmp_path / "fifo.ave", tmp_path / "dir.ave", tmp_path / "good.ave"
    os.mkfifo(fifo)
    folder.mkdir()
    good.write_text(GOOD.read_text())
    (tmp_path / "dangling.ave").symlink_to(tmp_path / "nowhere")
    r = run_real("check", "--no-violation-sets", str(fifo), str(folder), os.devnull, str(tmp_path / "dangling.ave"),
                 str(good))
    assert f"{fifo}: error: cannot read file: a FIFO, not a regular file" in r.stdout
    assert f"{folder}: error: cannot read file: a directory, not a regular file" in r.stdout
    assert f"{os.devnull}: error: cannot read file: a character device" in r.stdout
    assert "VERIFIED  gemm_naive" in r.stdout
    assert r.returncode == 2  # like a missing file (docs/cli.md): usage outranks the front end
    assert "Traceback" not in r.stdout + r.stderr


def test_directory_alone_is_a_usage_error_not_an_abort(ave, tmp_path):
    folder = tmp_path / "dir.ave"
    folder.mkdir()
    r = ave("check", folder, GOOD, "--no-violation-sets")
    assert r.code == 2 and "VERIFIED  gemm_naive" in r.out and "a directory, not a regular file" in r.out


# ------------------------------------------------------ 6. long quoted text
@pytest.mark.parametrize("literal", ["9" * 100_000, '"' + "a" * 100_000 + '"', "n" * 100_000,
                                     '"' + "a " * 50_000 + '"'])
def test_long_source_text_is_never_echoed_whole(ave, tmp_path, literal):
    path, r = check_text(ave, tmp_path, HEAD + f"    x = {literal}\n")
    located(r, path, 3)
    assert max(len(line) for line in r.out.splitlines()) < 400, max(len(line) for line in r.out.splitlines())
    assert "^" in r.out  # the snippet still points at the construct


# ---------------------------------------------------------- 7. line endings
BROKEN = GOOD.read_text().replace("    acc = 0.0\n", "    acc = foo\n")  # undefined name on line 12, col 11


def broken_span() -> tuple[int, int]:
    for n, line in enumerate(BROKEN.split("\n"), 1):
        if "foo" in line:
            return n, line.index("foo") + 1
    raise AssertionError


ENCODINGS = {
    "lf": lambda t: t.encode(),
    "crlf": lambda t: t.replace("\n", "\r\n").encode(),
    "cr": lambda t: t.replace("\n", "\r").encode(),
    "bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
    "bom_cr": lambda t: b"\xef\xbb\xbf" + t.replace("\n", "\r").encode(),
    "form_feeds": lambda t: ("\f" + t.replace("\n    tag(A", "\n\f    tag(A").replace("\n\ndef", "\n\f\ndef")
                             .replace("acc =", "acc\f=")).encode(),
}


@pytest.mark.parametrize("style", sorted(ENCODINGS))
def test_line_ending_styles_verify_and_keep_their_spans(ave, tmp_path, style):
    good = tmp_path / f"good_{style}.ave"
    good.write_bytes(ENCODINGS[style](GOOD.read_text()))
    if style != "bom" and style != "bom_cr":  # Python accepts the same bytes (a BOM only through its codec)
        pyast.parse(good.read_bytes().decode("utf-8"))
    r = ave("check", "--no-violation-sets", good)
    assert r.code == 0 and "VERIFIED  gemm_naive" in r.out, r.out[:2000]
    bad = tmp_path / f"bad_{style}.ave"
    bad.write_bytes(ENCODINGS[style](BROKEN))
    r = ave("check", bad)
    line, col = broken_span()
    assert r.out.startswith(f"{bad}:{line}:{col}: error: undefined name 'foo'"), r.out[:500]
    assert "foo" in r.out.splitlines()[2]  # the snippet quotes the right line


def test_form_feed_resets_the_indentation_column_as_in_python(ave, tmp_path):
    text = HEAD + "    t = thread_id(0)\n  \f    X[t] = X[t]\n"  # CPython: column 4 after the form feed
    pyast.parse(text.replace("@kernel(", "@k(").replace("Tensor[f32, (N,)]", "T"))
    _, r = check_text(ave, tmp_path, text)
    assert r.code == 0, r.out[:2000]


# -------------------------------------------------------------- 8. file size
def test_oversized_file_is_refused_before_parsing(ave, tmp_path):
    path = tmp_path / "huge.ave"
    comment = "# " + "x" * 97 + "\n"
    path.write_text(GOOD.read_text() + comment * (MAX_SOURCE_BYTES // len(comment) + 1))
    r = ave("check", path)
    assert r.code == 3
    assert r.out.startswith(f"{path}:1:1: error: file is {path.stat().st_size} bytes; a kernel file may have at "
                            f"most {MAX_SOURCE_BYTES} bytes"), r.out[:500]


def test_file_at_the_size_bound_is_checked(ave, tmp_path):
    path = tmp_path / "padded.ave"
    text = GOOD.read_text()
    comment = "# " + "x" * 97 + "\n"
    text += comment * ((MAX_SOURCE_BYTES - len(text)) // len(comment))
    path.write_text(text + "#" * (MAX_SOURCE_BYTES - len(text) - 1) + "\n")
    assert path.stat().st_size == MAX_SOURCE_BYTES
    assert ave("check", "--no-violation-sets", path).code == 0


# ---------------------------------------------------------- 9. launch shapes
LAUNCH = {
    "zero_block_extent": ("@kernel(grid=(1,), block=(0, 16), wave=64)", 1, "block extent 0 (dimension 0) must be at least 1"),
    "negative_block_extent": ("@kernel(grid=(1,), block=(-16, 16), wave=64)", 1, "block extent -16"),
    "too_many_threads": ("@kernel(grid=(1,), block=(1024, 1024), wave=64)", 1, "1048576 threads"),
    "nvidia_block_z": ("@kernel(grid=(1,), block=(4, 2, 128), warp=32)", 1, "limit of NVIDIA sm_90"),
    "zero_grid_extent": ("@kernel(grid=(0,), block=64, wave=64)", 1, "grid extent 0"),
    "nvidia_grid_y": ("@kernel(grid=(1, 70000), block=64, warp=32)", 1, "65535"),
}


@pytest.mark.parametrize("name", sorted(LAUNCH))
def test_launch_shapes_are_checked_against_the_target(ave, tmp_path, name):
    decorator, line, fragment = LAUNCH[name]
    path, r = check_text(ave, tmp_path, decorator + "\ndef k(X: Tensor[f32, (N,)]):\n    X[thread_id(0)] = X[0]\n")
    located(r, path, line, fragment)


def shared_kernel(group: str, buffers: int, kib_each: int) -> str:
    lines = "".join(f"    s{i} = shared(f32, ({kib_each * 256},))\n" for i in range(buffers))
    return f"@kernel(grid=(1,), block=64, {group})\ndef k(X: Tensor[f32, (N,)]):\n" + lines


@pytest.mark.parametrize("group, buffers, kib, ok", [("wave=64", 4, 16, True), ("wave=64", 5, 16, False),
                                                     ("warp=32", 3, 16, True), ("warp=32", 4, 16, False)])
def test_shared_memory_per_block(ave, tmp_path, group, buffers, kib, ok):
    path, r = check_text(ave, tmp_path, shared_kernel(group, buffers, kib))
    if ok:
        assert r.code == 0, r.out[:2000]
    else:
        located(r, path, 2 + buffers, "shared memory")


def test_pipeline_stages_count_in_shared_memory(ave, tmp_path):
    text = "@kernel(grid=(1,), block=64, warp=32)\ndef k(X: Tensor[f32, (N,)]):\n    s = shared(bf16, (4, 64, 128))\n"
    path, r = check_text(ave, tmp_path, text)
    located(r, path, 3, "65536 bytes")


WHOLE_GROUPS = {
    "mfma": ("from ave.amdgpu import mfma_f32_32x32x8_bf16\n@kernel(grid=(1,), block=96, wave=64)\n"
             "def k(X: Tensor[f32, (N,)]):\n    a = local(bf16, (4,), init=0)\n    c = local(f32, (16,), init=0)\n"
             "    c = mfma_f32_32x32x8_bf16(a, a, c)\n", 2, "mfma_f32_32x32x8_bf16 (line 6) needs whole waves"),
    "lane_reduction": ("@kernel(grid=(1,), block=48, warp=32)\ndef k(X: Tensor[f32, (N,)]):\n"
                       "    v = lane_max(X[thread_id(0)], 8)\n", 1, "needs whole warps"),
}


@pytest.mark.parametrize("name", sorted(WHOLE_GROUPS))
def test_wave_level_constructs_need_whole_groups(ave, tmp_path, name):
    text, line, fragment = WHOLE_GROUPS[name]
    path, r = check_text(ave, tmp_path, text)
    located(r, path, line, fragment)


def test_partial_group_without_wave_level_constructs_is_fine(ave, tmp_path):
    _, r = check_text(ave, tmp_path, "@kernel(grid=(N // 48,), block=48, warp=32)\ndef k(X: Tensor[f32, (N,)], "
                      "Y: Tensor[f32, (N,)]):\n    assume(N % 48 == 0)\n    t = block_id(0) * 48 + thread_id(0)\n"
                      "    Y[t] = X[t]\n")
    assert r.code == 0, r.out[:2000]


# ------------------------------------------------------ 10. numpy warnings
def test_check_writes_no_runtime_warning(tmp_path):
    path = tmp_path / "w.ave"
    path.write_text(HEAD + "    t = thread_id(0)\n    X[t // (t % 2)] = X[t % (t - t)]\n")
    r = run_real("check", str(path))
    assert r.returncode in (0, 1, 5), r.stdout[:2000]
    assert "Warning" not in r.stderr, r.stderr[:2000]


# ------------------------------------------------------------------- docs
def test_language_md_states_the_limits_the_code_enforces():
    from ave_decl.hw.expr import MAX_EXPR_DEPTH, MAX_SHIFT
    from ave_decl.hw.targets import GFX942, SM90

    doc = (ROOT / "docs" / "language.md").read_text()
    limits = doc[doc.index("## Limits"):]
    assert f"{MAX_SOURCE_BYTES:,} bytes" in limits and f"{MAX_SOURCE_BYTES // 1024} KiB" in limits
    assert f"{MAX_NESTING} levels" in limits and f"{MAX_EXPR_DEPTH} operations deep" in limits
    assert f"[0, {MAX_SHIFT}]" in limits
    assert f"{GFX942.shared_bytes // 1024} KiB (LDS" in limits and f"| {SM90.shared_bytes // 1024} KiB |" in limits
    assert f"| {GFX942.max_threads} | {SM90.max_threads} |" in limits
    assert "1024, 1024, 64" in limits and "65535, 65535" in limits


def test_ctrl_c_is_exit_130_not_the_violation_code(monkeypatch):
    """click's own "Aborted!" exited 1 (VIOLATION): an interrupted run must be told apart."""
    from click.testing import CliRunner

    import ave_decl.pipeline
    from ave_decl.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ave_decl.pipeline, "run", interrupted)
    result = CliRunner().invoke(main, ["check", str(EXAMPLES / "gemm_naive.ave")])
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output and "Aborted" not in result.output
