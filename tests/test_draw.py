"""`ave draw`: the pictures as a user gets them — well-formed SVG with the expected cells, the
violating cells of a heatmap equal to the set `ave check --json` reports, one-line usage errors,
escaped untrusted text, byte-identical output for the same input."""
from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from itertools import product

import pytest
from conftest import EXAMPLES, ONE_WAVE

from ave_decl.draw.finding_picture import finding_canvas, numbered_findings, violating_points
from ave_decl.draw.svg import Canvas
from ave_decl.hw.instructions import INSTRUCTIONS
from ave_decl.lang.operand_maps import slot_maps
from ave_decl.report.model import kernel_from_json
from ave_decl.solver.violation_set import Var, describe

SVG = "{http://www.w3.org/2000/svg}"


def cells(svg_text: str, kind: str = "") -> list[dict[str, str]]:
    """The attributes of every grid cell (optionally only those of one kind) of an SVG document."""
    root = ET.fromstring(svg_text.encode())
    assert root.tag == f"{SVG}svg"
    return [r.attrib for r in root.iter(f"{SVG}rect")
            if "cell" in r.get("class", "").split() and (not kind or kind in r.get("class", "").split())]


_CHECKED: dict[str, dict] = {}


def checked(ave, example: str) -> dict:
    """`ave check --json` of an example (once per test process: two tests compare against it)."""
    if example not in _CHECKED:
        _CHECKED[example] = ave("check", "--json", "--no-timings", EXAMPLES / example).json()
    return _CHECKED[example]


@pytest.mark.parametrize("example, number", [("gemm_lds_mfma_transposed.ave", 1),  # (lane, value)
                                             ("tails/gemm_tail_unmasked_store.ave", 1),  # (thread), bit cubes
                                             ("helpers/gemm_helpers_b_offset.ave", 1)])  # (thread, value)
def test_heatmap_violating_cells_are_the_reported_set(ave, tmp_path, example, number):
    out = tmp_path / "x.svg"
    r = ave("draw", "finding", EXAMPLES / example, "--finding", number, "-o", out)
    assert r.code == 0, r.err
    report = checked(ave, example)
    _, _, f = numbered_findings([kernel_from_json(k) for k in report["kernels"]])[number - 1]
    vs, c = f.violation_set, f.counterexample
    assert vs is not None and vs["complete"]
    svg = out.read_text()
    if vs["variables"] == ["lane", "value"]:
        sizes = [c.group_size, vs["total"] // c.group_size]
        key = ("data-lane", "data-slot")
        marked = {(c.lhs.lane, c.lhs.value_index)}
    elif vs["variables"] == ["thread", "value"]:  # block=256 in the example
        sizes, key, marked = [256, vs["total"] // 256], ("data-thread", "data-slot"), {(c.thread_linear, c.value_index)}
    else:
        sizes, key, marked = [vs["total"]], ("data-thread",), {(c.thread_linear,)}
    drawn = {tuple(int(a[k]) for k in key) for a in cells(svg, "violating")}
    assert drawn == violating_points(vs, sizes)
    assert len(drawn) == vs["count"] and len(cells(svg)) == vs["total"]
    assert {tuple(int(a[k]) for k in key) for a in cells(svg, "counterexample")} == marked
    assert f"url(#finding-hatch)" in svg  # violating cells are hatched, not only coloured


def test_cube_expansion_inverts_the_reported_description():
    """The heatmap's points come from the report's Espresso cubes: expanding them gives back every
    point solver/violation_set.py described (ranges, bit patterns, sizes that are no power of 2)."""
    rng = random.Random(7)
    for sizes in ([64, 4], [256], [48, 3], [32, 16]):
        variables = [Var(name, None, size) for name, size in zip(["lane", "value"], sizes)]
        space = list(product(*[range(s) for s in sizes]))
        for density in (0.1, 0.5, 1.0):
            points = {p for p in space if rng.random() < density}
            if not points:
                continue
            vs = describe(points, variables, True)
            assert violating_points(vs, sizes) == points, vs["description"]


def test_layout_grid_shows_offsets_banks_and_swizzle_phases(ave, tmp_path):
    r = ave("draw", "layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "As")
    assert r.code == 0, r.err
    grid = cells(r.out)
    assert len(grid) == 64 * 64
    offsets = sorted(int(a["data-offset"]) for a in grid)
    assert offsets == list(range(64 * 64))  # the swizzle permutes the tile
    for a in grid:  # bf16: two elements per 4-byte bank word, 32 banks
        assert int(a["data-bank"]) == int(a["data-offset"]) * 2 // 4 % 32
    row1 = [a for a in grid if a["data-row"] == "1"]
    assert {int(a["data-offset"]) - 64 for a in row1} == set(range(64)) and " ^8" in r.out
    few = ave("draw", "layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "Bs", "--rows", "4")
    assert len(cells(few.out)) == 4 * 64


@pytest.mark.parametrize("name", ["mfma_f32_32x32x8_bf16", "mma_m16n8k16_f16"])
def test_operand_grids_hold_every_element_once(ave, name):
    r = ave("draw", "operands", name)
    assert r.code == 0, r.err
    instr = INSTRUCTIONS[name]
    root = ET.fromstring(r.out.encode())
    for operand, op, shape in (("A", instr.a, (instr.m, instr.k)), ("B", instr.b, (instr.k, instr.n)),
                               ("C", instr.c, (instr.m, instr.n))):
        group = next(g for g in root.iter(f"{SVG}g") if f"operand-{operand}" in g.get("class", "").split())
        grid = [r.attrib for r in group.iter(f"{SVG}rect") if "cell" in r.get("class", "")]
        assert len(grid) == instr.group_size * op.values
        rows, cols = slot_maps(op, instr.group_size)
        for a in grid:
            lane, slot = int(a["data-lane"]), int(a["data-slot"])
            assert (int(a["data-row"]), int(a["data-col"])) == (rows[lane, slot], cols[lane, slot])
        if operand == "C":  # the accumulator: each element in exactly one lane and slot
            assert sorted((int(a["data-row"]), int(a["data-col"])) for a in grid) == \
                sorted(product(range(shape[0]), range(shape[1])))


@pytest.mark.parametrize("args, message", [
    (["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "Q"], "has no buffer 'Q' (shared buffers: As, Bs)"),
    (["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "A"], "'A' is a global tensor"),
    (["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "As", "--kernel", "nope"], "has no kernel 'nope'"),
    (["operands", "mfma_32x32"], "unknown instruction 'mfma_32x32' (did you mean"),
    (["finding", EXAMPLES / "gemm_naive.ave", "--finding", "1"], "has no findings"),
    (["finding", EXAMPLES / "gemm_lds_mfma_transposed.ave", "--finding", "99"], "has findings 1-7"),
    (["finding", EXAMPLES / "gemm_lds_mfma_transposed.ave", "--finding", "3"], "has no counterexample to draw"),
    (["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "As", "-o", "/nonexistent/dir/x.svg"],
     "no directory /nonexistent/dir"),
    (["operands", "mfma_f32_32x32x8_bf16", "--format", "png"], "give -o FILE.png"),
    (["operands", "mfma_f32_32x32x8_bf16", "-o", "/proc/ave-x.svg"], "cannot write /proc/ave-x.svg"),
    (["operands", "mfma_f32_32x32x8_bf16", "-o", "/nonexistent-dir/"], "give a file name"),
])
def test_bad_input_is_one_line_and_exit_2(ave, args, message):
    r = ave("draw", *args)
    assert r.code == 2, r.out + r.err
    assert message in r.err and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err


def test_front_end_error_is_located_and_exit_3(ave, tmp_path):
    bad = tmp_path / "bad.ave"
    bad.write_text(ONE_WAVE + "    As = shared(bf99, (8,))\n")
    r = ave("draw", "layout", bad, "--buffer", "As")
    assert r.code == 3 and r.err.startswith(f"{bad}:3:"), r.err
    missing = ave("draw", "finding", tmp_path / "missing.ave")
    assert missing.code == 2 and "cannot read" in missing.err and "Traceback" not in missing.err


def hostile_copy(tmp_path):
    """The violating example under a hostile file name, with a hostile comment on the MFMA line
    (markup, and control characters XML cannot hold even escaped)."""
    text = (EXAMPLES / "gemm_lds_mfma_transposed.ave").read_text()
    text = text.replace("acc = mfma_f32_32x32x8_bf16(a, b, acc)",
                        "acc = mfma_f32_32x32x8_bf16(a, b, acc)  # <script>alert('x')</script> & \"q\" \x01\x1b[31m")
    path = tmp_path / "k<script>.ave"
    path.write_text(text)
    return path


def test_untrusted_text_is_escaped_in_the_svg(ave, tmp_path):
    path = hostile_copy(tmp_path)
    r = ave("draw", "finding", path, "--finding", "1")
    assert r.code == 0, r.err
    root = ET.fromstring(r.out.encode())  # well-formed although the name and the line hold markup
    assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
    texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "<script>alert('x')</script>" in texts and "k<script>.ave" in texts
    assert "\ufffd\ufffd[31m" in texts  # the control characters, replaced


def test_text_xml_cannot_hold_is_replaced():
    """Control characters and lone surrogates (a file name's undecodable bytes) in any text or
    attribute: the document stays well-formed."""
    cv = Canvas("t")
    bad = "a\x00b\x1bc\udcffd\ufffe"
    cv.title(cv.rect(0, 0, 1, 1, "#ffffff", data_file=bad), bad)
    cv.text(0, 0, bad)
    root = ET.fromstring(cv.to_string().encode("utf-8"))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["a\ufffdb\ufffdc\ufffdd\ufffd"]
    assert next(root.iter(f"{SVG}rect")).get("data-file") == "a\ufffdb\ufffdc\ufffdd\ufffd"


def test_an_incomplete_set_leaves_the_rest_undecided(ave):
    """A set cut by the enumeration budget ("at least N"): the points not enumerated are drawn as
    undecided (dotted, may violate), never as holding."""
    report = checked(ave, "gemm_lds_mfma_transposed.ave")
    _, _, f = numbered_findings([kernel_from_json(k) for k in report["kernels"]])[0]
    assert f.violation_set is not None
    f.violation_set = dict(f.violation_set, complete=False, count=128, cubes=[{"lane": "32-63", "value": "any"}])
    svg = finding_canvas(1, f, None, None).to_string()
    assert {int(a["data-lane"]) for a in cells(svg, "violating")} == set(range(32, 64))
    assert len(cells(svg, "violating")) == 128 and len(cells(svg, "undecided")) == 128
    assert not cells(svg, "clean") and "url(#finding-dots)" in svg and "may violate" in svg


def test_layout_of_other_ranks(ave, tmp_path):
    """A rank-3 buffer's rows are its leading indices flattened, each cell titled with its own
    index; a scalar buffer is one cell."""
    path = tmp_path / "ranks.ave"
    path.write_text(ONE_WAVE + "    T3 = shared(f32, (2, 3, 4))\n    T0 = shared(f32, ())\n")
    r = ave("draw", "layout", path, "--buffer", "T3")
    assert r.code == 0, r.err
    titles = [t.text for t in ET.fromstring(r.out.encode()).iter(f"{SVG}title")]
    assert len(cells(r.out)) == 24 and "T3[1, 2, 3] -> offset 23, bank 23" in titles
    assert "T3[0, 1, 0] -> offset 4, bank 4" in titles
    r = ave("draw", "layout", path, "--buffer", "T0")
    assert r.code == 0 and len(cells(r.out)) == 1, r.err


def test_output_follows_links_and_never_replaces_a_pipe(ave, tmp_path):
    """-o through a symbolic link replaces the file it names (the link stays); -o naming a FIFO (or
    a device such as /dev/stdout) writes into it instead of renaming a file over it."""
    args = ["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "As", "--rows", "1"]
    target, link = tmp_path / "real.svg", tmp_path / "link.svg"
    target.write_text("old")
    link.symlink_to("real.svg")
    assert ave("draw", *args, "-o", link).code == 0
    assert link.is_symlink() and target.read_text().startswith("<?xml")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer's open returns
    try:
        r = ave("draw", *args, "-o", fifo)
        assert r.code == 0, r.err
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert os.read(reader, 1 << 16).startswith(b"<?xml")  # one row: far below a pipe's buffer
    finally:
        os.close(reader)


def test_same_input_same_bytes(ave, tmp_path):
    """The same picture in this process and in another one with another string-hash seed (a set's
    order, were one iterated into the picture, would differ there)."""
    for args in (["layout", EXAMPLES / "gemm_lds_swizzled.ave", "--buffer", "As", "--rows", "8"],
                 ["operands", "mfma_f32_16x16x16_bf16"]):
        here = ave("draw", *args).out
        assert here == ave("draw", *args).out
        other = subprocess.run([sys.executable, "-m", "ave_decl.cli", "draw", *map(str, args)], capture_output=True,
                               env={**os.environ, "PYTHONHASHSEED": "12345"}, check=True, text=True).stdout
        assert other == here


def test_png_output(ave, tmp_path):
    try:
        import cairosvg  # noqa: F401
    except (ImportError, OSError):  # OSError: CairoSVG without the cairo C library
        pytest.skip("PNG needs the png extra (pip install 'ave-decl[png]') and the cairo library")
    out = tmp_path / "ops.png"
    r = ave("draw", "operands", "mma_m16n8k16_f16", "-o", out)
    assert r.code == 0, r.err
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
