"""Issue 20, "rule authors are blind": `--print-relation`, the facts a newcomer needed (value_op,
value_expr, kernel_attr, per-lane strides of global accesses), `ave/global-coalescing`, and the
documented bit operators."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from conftest import EXAMPLES, ROOT

import ave_decl
from ave_decl.datalog.ruleset import load_rules
from ave_decl.facts.lower import lower_module, printable
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.pipeline import printing_engine
from ave_decl.report.model import Verdict
from ave_decl.solver.derived_facts import add_semantic_facts

COALESCING = "ave/global-coalescing"


def facts_of(text: str, path: str = "k.ave"):
    src = SourceFile(path, text)
    (kf,) = lower_module(parse_source(src), src, 0)
    add_semantic_facts(kf)
    return kf


def strides(kf) -> dict[int, tuple]:
    """access id -> (buffer, (run, stride) or None, {dim: (run, stride)})."""
    coord: dict[int, dict[int, tuple]] = {}
    for _, a, d, run, s in kf.relation("access_lane_coord_stride"):
        coord.setdefault(a, {})[d] = (run, s)
    addr = {a: (run, s) for _, a, run, s in kf.relation("access_lane_stride")}
    return {a: (b, addr.get(a), coord.get(a, {})) for _, a, _s, b, _k in kf.relation("access")}


# ----------------------------------------------------------------- --print-relation
def test_print_relation_text_locates_ids(ave):
    r = ave("check", EXAMPLES / "gemm_naive.ave", "--print-relation", "access_lane_stride",
            "--print-relation", "access_addr")
    assert r.code == 0, r.out + r.err
    assert ("relation access_lane_stride(k:Kernel, a:Access, run:number, stride:number) in gemm_naive "
            "(examples/gemm_naive.ave): 3 tuples") in r.out.replace(str(EXAMPLES), "examples")
    lines = r.out.splitlines()
    # a = A[m, k] (line 14): the 16 lanes of a block row share m and k
    assert any(ln.strip().startswith("(0, 1, 16, 0)") and "gemm_naive.ave:14:9" in ln for ln in lines)
    # ExprId columns are printed as expressions
    assert any("addr=" in ln and " is (" in ln and "size:K" in ln for ln in lines)


def test_print_relation_of_a_relation_that_is_not_an_output(ave, tmp_path):
    """nb_reach (core) and a user helper relation have no `.output`: they are printed all the same."""
    rules = tmp_path / "myrules"
    rules.mkdir()
    (rules / "helper.dl").write_text(
        "// @id user/helper\n// @title helper\n// @severity warning\n// @description d\n// @help h\n"
        ".decl global_load(k:Kernel, a:Access)\n"
        "global_load(k, a) :- access(k, a, _, b, \"load\"), buffer(k, b, \"global\", _).\n")
    r = ave("check", "--rules", rules, EXAMPLES / "gemm_naive.ave", "--print-relation", "global_load",
            "--print-relation", "nb_reach")
    assert r.code == 0, r.out + r.err
    assert "relation global_load(k:Kernel, a:Access) in gemm_naive" in r.out
    assert "): 2 tuples" in r.out  # A[m, k] and B[k, n]
    assert "a=1 at " in r.out and "gemm_naive.ave:15:9" in r.out
    assert "relation nb_reach(k:Kernel, a:Stmt, b:Stmt) in gemm_naive" in r.out


def test_print_relation_json_is_a_documented_schema_field(ave):
    r = ave("check", "--json", EXAMPLES / "untagged_operand.ave", "--print-relation", "kernel_attr",
            "--print-relation", "reaching_store")
    assert r.code == 1
    data = r.json()
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    dumps = {d["relation"]: d for d in data["relations"]}
    attrs = dumps["kernel_attr"]
    assert attrs["kernel"] == "exchange_untagged"
    assert [c["name"] for c in attrs["columns"]] == ["k", "name", "value"]
    assert {tuple(t["values"][1:]) for t in attrs["tuples"]} == {("grid", "(N // 64,)"), ("block", "64"),
                                                                   ("wave", "64")}
    rs = dumps["reaching_store"]
    assert rs["tuples"] and all(t["locations"][1] and t["locations"][1]["line"] > 0 for t in rs["tuples"])
    assert "relations" not in ave("check", "--json", EXAMPLES / "untagged_operand.ave").json()


def test_print_relation_changes_no_verdict(ave):
    plain = ave("check", "--json", EXAMPLES / "gemm_lds_mfma_transposed.ave").json()
    printed = ave("check", "--json", EXAMPLES / "gemm_lds_mfma_transposed.ave", "--print-relation", "obligation",
                  "--print-relation", "war_candidate").json()
    assert plain["exit_code"] == printed["exit_code"] == 1
    key = [(f["invariant"], f["verdict"], f["location"]["line"]) for f in plain["kernels"][0]["findings"]]
    assert key == [(f["invariant"], f["verdict"], f["location"]["line"]) for f in printed["kernels"][0]["findings"]]
    obligations = {d["relation"]: d for d in printed["relations"]}["obligation"]["tuples"]
    assert obligations and all(t["locations"][1]["line"] > 0 for t in obligations)  # the site: a Stmt


def test_unknown_relation_is_a_one_line_usage_error(ave):
    r = ave("check", EXAMPLES / "gemm_naive.ave", "--print-relation", "access_adr")
    assert r.code == 2
    assert r.out == ""
    (line,) = r.err.strip().splitlines()
    assert "unknown relation 'access_adr'" in line and "access_addr" in line
    r = ave("check", EXAMPLES / "gemm_naive.ave", "--print-relation", "zz\nqq")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_souffle_gets_a_generated_output_file_removed_afterwards():
    """Soufflé writes only `.output` relations: printing a derived non-output relation adds a
    generated `.output` file to the program for that run, and removes it on exit."""
    prog = load_rules()
    assert "nb_reach" not in prog.outputs
    sentinel = object()
    with printing_engine("embedded", prog, sentinel, ("nb_reach", "stmt", "obligation")) as engine:  # type: ignore[arg-type]
        assert engine is not sentinel
        extra = Path(engine.prog.files[-1].path)
        assert extra.read_text() == ".output nb_reach\n"  # inputs and outputs need none
        assert "nb_reach" in engine.prog.outputs and "nb_reach" not in prog.outputs
    assert not extra.exists() and not extra.parent.exists()
    with printing_engine("embedded", prog, sentinel, ("stmt", "obligation")) as engine:  # type: ignore[arg-type]
        assert engine is sentinel


# ----------------------------------------------------------------- new facts
OPS = """@kernel(grid=(1,), block=64, wave=64, reference="Y = X")
def ops(X: Tensor[f32, (64,)], Y: Tensor[f32, (64,)]):
    t = thread_id(0)
    x = X[t]
    y = -x + x * 2.0 - x / x
    z = exp(y) ** 2.0
    w = max(z, x)
    Y[t] = select(w < x, w, t + 1)
"""


def test_value_op_and_value_expr():
    kf = facts_of(OPS)
    ops = sorted(op for _, _v, op in kf.relation("value_op"))
    assert ops == sorted(["neg", "mul", "add", "div", "sub", "exp", "pow", "max", "lt", "select"])
    elementwise = {v for _, v, kind, _s in kf.relation("value") if kind == "elementwise"}
    assert {v for _, v, _op in kf.relation("value_op")} == elementwise
    ((_, v, e),) = kf.relation("value_expr")
    assert {vid: kind for _, vid, kind, _s in kf.relation("value")}[v] == "index"
    from ave_decl.facts.locate import expr_text

    assert expr_text(kf.table, e, 80) == "(tid:0 + 1)"


def test_kernel_attr_rows_and_escapes():
    kf = facts_of((EXAMPLES / "gemm_naive.ave").read_text())
    attrs = {name: value for _, name, value in kf.relation("kernel_attr")}
    assert attrs == {"grid": "(M // 16, N // 16)", "block": "(16, 16)", "wave": "64", "reference": "C = A @ B"}
    assert printable("a\tb\nc\x00d é") == "a\\tb\\nc\\x00d é"


# ----------------------------------------------------------------- per-lane strides
def test_strides_of_the_examples():
    kf = facts_of((EXAMPLES / "gemm_lds_swizzled.ave").read_text())
    got = {b: (addr, coords) for b, addr, coords in strides(kf).values() if b in ("A", "B", "C")}
    assert got["A"] == ((64, 1), {0: (64, 0), 1: (64, 1)})  # the tile copy: a whole wave on one row
    assert got["C"] == ((32, 1), {0: (32, 0), 1: (32, 1)})  # the MFMA C layout: 32 lanes per row
    kf = facts_of((EXAMPLES / "gemm_naive.ave").read_text())
    got = {b: addr for b, addr, _ in strides(kf).values() if b in ("A", "B", "C")}
    assert got == {"A": (16, 0), "B": (16, 1), "C": (16, 1)}  # block (16, 16): runs of 16 lanes


STRIDED = """@kernel(grid=(M // 64,), block=64, wave=64)
def strided(A: Tensor[f32, (M, 8)], B: Tensor[f32, (8, M)], C: Tensor[f32, (M, K)], D: Tensor[f32, (M,)]):
    assume(M % 64 == 0)
    t = thread_id(0)
    r = block_id(0) * 64 + t
    for j in range(8):
        if r < M:
            D[r] = A[r, j] + B[j, r] + C[r, 0]
"""


def test_strides_through_z3_guarded_and_size_dependent():
    """Block ids and a guard send every access to Z3 (not enumerable): a row read 8 elements
    apart, a coalesced one, and one whose stride is the size K (only coordinate strides)."""
    kf = facts_of(STRIDED)
    got = {b: (addr, coords) for b, addr, coords in strides(kf).values()}
    assert got["A"] == ((64, 8), {0: (64, 1), 1: (64, 0)})
    assert got["B"] == ((64, 1), {0: (64, 0), 1: (64, 1)})
    assert got["C"] == (None, {0: (64, 1), 1: (64, 0)})
    assert got["D"] == ((64, 1), {0: (64, 1)})


def test_no_stride_for_a_gather_or_a_single_lane():
    text = """@kernel(grid=(1,), block=64, wave=64)
def g(X: Tensor[f32, (N,)], ids: Tensor[i32, (64,), (0, N)], Y: Tensor[f32, (64,)]):
    t = thread_id(0)
    Y[t] = X[ids[t]]
    if t == 0:
        Y[0] = X[0]
"""
    kf = facts_of(text)
    lines = {a: s for _, a, s, _b, _k in kf.relation("access")}
    by_buffer = {(b, lines[a]): addr for a, (b, addr, _c) in strides(kf).items()}
    assert by_buffer[("ids", lines[0])] == (64, 1)
    xs = [addr for (b, _s), addr in by_buffer.items() if b == "X"]
    assert xs == [None, None]  # the gather varies per lane; the `t == 0` access has no lane pair


# ----------------------------------------------------------------- ave/global-coalescing
def coalescing(report) -> list[tuple[str, int, str]]:
    return [(k.kernel, f.location.line, f.message) for k in report.kernels for f in k.findings
            if f.invariant == COALESCING]


def test_global_coalescing_is_quiet_on_coalesced_examples():
    for name in ("gemm_lds_swizzled", "gemm_pipelined", "gemm_naive", "gemm_mfma16", "fused_moe"):
        report = ave_decl.check(EXAMPLES / f"{name}.ave")
        assert coalescing(report) == [], name


def test_global_coalescing_warns_on_strided_accesses_without_changing_the_verdict(ave, tmp_path):
    path = tmp_path / "strided.ave"
    path.write_text(STRIDED)
    report = ave_decl.check(path)
    (k,) = report.kernels
    found = coalescing(report)
    assert len(found) == 2, found
    assert any("access A 8 elements apart (in runs of 64 lanes)" in m for _, _, m in found)
    assert any("access C along its dimension 0, a size-dependent number of elements apart" in m
               for _, _, m in found)
    assert all(f.severity == "warning" and f.verdict == Verdict.VIOLATION and not f.counts
               for f in k.findings if f.invariant == COALESCING)
    assert k.verdict == Verdict.VERIFIED and report.exit_code == 0
    r = ave("check", path)
    assert r.code == 0
    assert r.out.count("warning[ave/global-coalescing]") == 2


def test_the_mma_c_fragment_store_is_reported():
    """The m16n8 C fragment: lanes 2 elements apart in runs of 4 (half of each sector unused)."""
    found = coalescing(ave_decl.check(EXAMPLES / "gemm_mma_ldmatrix.ave"))
    assert found == [("gemm_mma_ldmatrix", 39, "consecutive lanes of a warp access C 2 elements apart (in runs "
                                                "of 4 lanes): the access is not coalesced")]


# ----------------------------------------------------------------- documented bit operators
def test_documented_bit_operators_on_the_embedded_engine(tmp_path):
    """docs/writing-invariants.md §7: every operator of its table, parenthesised, with its value."""
    from ave_decl.datalog.clingo_engine import ClingoEngine
    from ave_decl.datalog.lint import lint
    from ave_decl.datalog.loader import load_program

    cases = {"(6 band 3)": 2, "(6 bor 3)": 7, "(6 bxor 3)": 5, "(bnot 0)": -1, "(1 bshl 33)": 2,
             "(-8 bshr 1)": -4, "(-8 bshru 28)": 15, "(2 land 0)": 0, "(2 lor 0)": 1, "(2 lxor 3)": 0,
             "(lnot 5)": 0, "((2 * 3) band 1)": 0,
             # Soufflé's precedence without parentheses (the profile's grammar once bound bit operators tighter than *)
             "2 * 3 band 1": 0, "1 + 2 bshl 1": 6, "6 band 3 bor 8": 10, "1 bor 6 band 3": 3, "5 bxor 1 band 1": 4,
             "1 lor 0 land 0": 1, "-2 ^ 2": -4, "2 ^ 3 ^ 2": 512}
    text = ".decl r(i:number, x:number)\n" + "".join(
        f"r({i}, x) :- x = {expr}.\n" for i, expr in enumerate(cases)) + ".output r\n"
    (tmp_path / "ops.dl").write_text(text)
    prog = load_program([tmp_path])
    lint(prog)
    rows = dict(ClingoEngine(prog).run({})["r"])
    assert {expr: rows[i] for i, expr in enumerate(cases)} == cases
