"""The Soufflé-profile front end and the embedded clingo engine, on real clingo (no mocks)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
from ave_decl.lang.errors import RuleError


def run_dl(tmp_path: Path, text: str, facts: dict | None = None) -> dict:
    f = tmp_path / "p.dl"
    f.write_text(text)
    prog = load_program([f])
    lint(prog)
    return ClingoEngine(prog).run(facts or {})


def test_arithmetic_matches_souffle_semantics(tmp_path):
    # Values from ../shared/reference/datalog-engines.md §1.3 (Soufflé 2.5, 32-bit).
    out = run_dl(tmp_path, """
        .decl r(name:symbol, v:number)
        r("div", -7 / 2). r("mod", -7 % 3). r("mod2", 7 % -3). r("pow", 2 ^ 10). r("xor", 5 bxor 3).
        r("and", 5 band 3). r("or", 5 bor 3). r("not", bnot 5). r("shl31", 1 bshl 31). r("shl32", 1 bshl 32).
        r("shr", -7 bshr 1). r("shru", -8 bshru 1). r("wrap", 2147483647 + 1). r("min", min(3, 1, 2)).
        .output r
    """)
    got = dict(out["r"])
    assert got == {"div": -3, "mod": -1, "mod2": 1, "pow": 1024, "xor": 6, "and": 1, "or": 7, "not": -6,
                   "shl31": -2147483648, "shl32": 1, "shr": -4, "shru": 2147483644, "wrap": -2147483648, "min": 1}


def test_underscore_named_variables_join(tmp_path):
    # `_y` is a named variable in Soufflé (a constant in gringo): it must join.
    out = run_dl(tmp_path, """
        .decl e(a:number, b:number)
        .decl p(a:number)
        p(x) :- e(x, _y), e(_y, x).
        .output p
    """, {"e": [(1, 2), (2, 1), (3, 4)]})
    assert out["p"] == [(1,), (2,)]


def test_negation_and_symbols(tmp_path):
    out = run_dl(tmp_path, """
        .decl n(x:symbol)
        .decl bad(x:symbol)
        .decl good(x:symbol)
        good(x) :- n(x), !bad(x).
        .output good
    """, {"n": [("a",), ('q"uote',), ("back\\slash",)], "bad": [("a",)]})
    assert out["good"] == [("back\\slash",), ('q"uote',)]


def test_disjunction_expands(tmp_path):
    out = run_dl(tmp_path, """
        .decl a(x:number)
        .decl b(x:number)
        .decl c(x:number)
        c(x) :- (a(x) ; b(x)), x > 1.
        .output c
    """, {"a": [(1,), (2,)], "b": [(3,)]})
    assert out["c"] == [(2,), (3,)]


@pytest.mark.parametrize("text, fragment, line", [
    (".decl a(x:number)\na(x) :- b(x).\n", "relation b is not declared", 2),
    (".decl a(x:number)\n.decl b(x:number, y:number)\na(x) :- b(x).\n", "has 2 attributes", 3),
    (".decl a(x:number)\n.decl b(x:number)\na(y) :- b(x).\n", "not grounded", 3),
    (".decl a(x:number)\n.decl b(x:number)\na(x) :- b(x), !a(x).\n", "unable to stratify", 3),
    (".decl a(x:float)\n", "portable profile", 1),
    (".decl a(x:number)\na(3000000000).\n", "does not fit in 32 bits", 2),
    (".decl a(x:number)\n.decl b(x:number)\na(c) :- b(x), c = mean y : b(y).\n", "mean", 3),
    (".decl a(x:number)\n.decl b(x:number)\na(c) :- c = count : { a(_) }.\n", "unable to stratify", 3),
    (".decl a(x:number)\n.decl b(x:number)\na(c) :- b(c), c = sum x : { b(x), y > 0 }.\n", "not grounded", 3),
    (".decl a(x:number)\n.decl b(x:symbol)\na(x) :- b(x).\n", "used as both", 3),
    (".decl a(x:number)\n.limitsize a(n=3)\n", "directive", 2),
    (".decl a(x:number)\na(x) :- a(x)\n", "syntax error", 2),
])
def test_lint_rejects_with_file_line(tmp_path, text, fragment, line):
    f = tmp_path / "bad.dl"
    f.write_text(text)
    with pytest.raises(RuleError) as info:
        lint(load_program([f]))
    assert fragment in info.value.message
    assert info.value.span is not None and info.value.span.path == str(f) and info.value.span.line == line


def test_broken_user_rule_exit_4(tmp_path, ave):
    (tmp_path / "mine.dl").write_text("// @id user/x\n.decl q(x:number)\nq(x) :- nothere(x).\n")
    r = ave("check", "--rules", tmp_path, EXAMPLES / "gemm_naive.ave")
    assert r.code == 4
    assert f"{tmp_path / 'mine.dl'}:3:" in r.out and "nothere" in r.out


def test_user_invariant_without_python(tmp_path, ave):
    (tmp_path / "no_assert_in_branch.dl").write_text(
        "// @id user/assert-outside-branch\n"
        "// @title Tag assertions must not sit under an if\n"
        "// @severity error\n"
        "// @description A guarded assertion is only checked on some threads.\n"
        "structural(k, s, \"user/assert-outside-branch\", \"guarded\") :- stmt(k, s, \"assert\", _, _, _, _),"
        " guard(k, s, _, _).\n")
    src = tmp_path / "k.ave"
    src.write_text((EXAMPLES / "gemm_naive.ave").read_text().replace(
        "        assert_tag(a, b,", "        if k < 4:\n            assert_tag(a, b,"))
    r = ave("check", "--json", "--rules", tmp_path, src)
    findings = r.json()["kernels"][0]["findings"]
    mine = [f for f in findings if f["invariant"] == "user/assert-outside-branch"]
    assert len(mine) == 1 and mine[0]["title"] == "Tag assertions must not sit under an if"
    assert mine[0]["severity"] == "error" and mine[0]["verdict"] == "VIOLATION"
    assert r.code == 1


def _doc_rule(heading: str) -> str:
    """The first code block after a heading of docs/writing-invariants.md (the test follows the guide)."""
    text = (EXAMPLES.parent / "docs" / "writing-invariants.md").read_text()
    section = text[text.index(heading):]
    return section.split("```")[1].lstrip("\n")


def test_user_obligation_without_python(tmp_path, ave):
    (tmp_path / "local_bounds.dl").write_text(_doc_rule("## 5."))
    src = tmp_path / "k.ave"
    src.write_text((EXAMPLES / "gemm_lds_mfma.ave").read_text().replace("for r in range(16):", "for r in range(17):"))
    r = ave("check", "--json", "--no-violation-sets", "--rules", tmp_path, src)
    mine = [f for f in r.json()["kernels"][0]["findings"] if f["invariant"] == "user/local-bounds"]
    assert mine and all(f["title"] == "Register arrays are indexed in bounds" for f in mine)
    bad = [f for f in mine if f["verdict"] == "VIOLATION"]
    assert len(bad) == 1 and bad[0]["counterexample"]["iterations"] == {"r": 16}


def test_user_structural_rule_from_the_guide(tmp_path, ave):
    (tmp_path / "outputs.dl").write_text(_doc_rule("## 4."))
    src = tmp_path / "k.ave"
    src.write_text((EXAMPLES / "gemm_lds_mfma.ave").read_text().replace('    tag(C, lambda m, n: (m, n), "C")\n', ""))
    r = ave("check", "--json", "--rules", tmp_path, src)
    mine = [f for f in r.json()["kernels"][0]["findings"] if f["invariant"] == "user/tag-your-outputs"]
    assert len(mine) == 1 and mine[0]["verdict"] == "VIOLATION" and r.code == 1


def test_rules_lint_command(ave):
    r = ave("rules", "lint")
    assert r.code == 0 and r.out.startswith("ok:")


AGG_FACTS = {"a": [("p", 5), ("q", 5), ("r", 7)], "k": [("p",), ("z",)]}


def test_aggregates_per_tuple_semantics(tmp_path):
    # ../shared/reference/datalog-engines.md §1.4: Soufflé sums per body tuple (17, not 12),
    # counts with `_`, gives 0 for an empty count/sum and no tuple for an empty min.
    out = run_dl(tmp_path, """
        .decl a(k:symbol, x:number)
        .decl k(s:symbol)
        .decl total(s:number)
        .decl fives(c:number)
        .decl per(s:symbol, c:number, t:number)
        .decl smallest(s:symbol, m:number)
        .decl biggest(m:number)
        total(s) :- s = sum x : a(_, x).
        fives(c) :- c = count : a(_, 5).
        per(s, c, t) :- k(s), c = count : { a(s, _) }, t = sum x : { a(s, x) }.
        smallest(s, m) :- k(s), m = min x : { a(s, x) }.
        biggest(m) :- m = max x : { a(_, x) }.
        .output total, fives, per, smallest, biggest
    """, AGG_FACTS)
    assert out["total"] == [(17,)]
    assert out["fives"] == [(2,)]
    assert out["per"] == [("p", 1, 5), ("z", 0, 0)]
    assert out["smallest"] == [("p", 5)]  # "z" has no a-tuple: min does not fire
    assert out["biggest"] == [(7,)]


def test_aggregate_in_comparison(tmp_path):
    out = run_dl(tmp_path, """
        .decl a(k:symbol, x:number)
        .decl k(s:symbol)
        .decl busy(s:symbol)
        busy(s) :- k(s), count : { a(s, _) } >= 1.
        .output busy
    """, AGG_FACTS)
    assert out["busy"] == [("p",)]


def test_division_by_a_variable_is_outside_the_profile(tmp_path):
    # Soufflé evaluates `10 / x` before a `x != 0` guard and aborts, so the profile forbids it.
    with pytest.raises(RuleError) as info:
        run_dl(tmp_path, ".decl n(x:number)\n.decl q(x:number)\nq(10 / x) :- n(x), x != 0.\n.output q\n")
    assert "non-constant divisor" in info.value.message and info.value.span.line == 3
    ok = run_dl(tmp_path, ".decl n(x:number)\n.decl q(x:number)\nq(x / -2) :- n(x).\n.output q\n", {"n": [(7,)]})
    assert ok["q"] == [(-3,)]


def test_eqrel_expansion(tmp_path):
    # Same 13 pairs as Soufflé for (1,2),(2,3),(5,6) (reference sheet §1.5).
    out = run_dl(tmp_path, """
        .decl e(a:number, b:number)
        .decl eq(a:number, b:number) eqrel
        eq(x, y) :- e(x, y).
        .output eq
    """, {"e": [(1, 2), (2, 3), (5, 6)]})
    assert len(out["eq"]) == 13 and (3, 1) in out["eq"] and (6, 5) in out["eq"] and (5, 5) in out["eq"]


def test_string_functors(tmp_path):
    out = run_dl(tmp_path, """
        .decl s(x:symbol)
        .decl r(a:symbol, b:number, c:symbol, d:symbol, e:number)
        r(cat(x, "!"), strlen(x), substr(x, 1, 3), substr(x, 9, 1), to_number("0x10")) :- s(x), contains("ll", x).
        .output r
    """, {"s": [("hello",), ("héllo",), ("abc",)]})
    assert out["r"] == [("hello!", 5, "ell", "", 16), ("héllo!", 6, "él", "", 16)]  # byte-based, like Soufflé


def test_to_number_error(tmp_path):
    with pytest.raises(RuleError):
        run_dl(tmp_path, ".decl r(x:number)\nr(to_number(\"abc\")).\n.output r\n")


def test_engine_timeout_in_worker(tmp_path):
    f = tmp_path / "slow.dl"
    f.write_text(".decl n(x:number)\nn(0).\nn(x + 1) :- n(x), x < 3000000.\n.output n\n")
    prog = load_program([f])
    lint(prog)
    from ave_decl.datalog.souffle_engine import EngineTimeout
    with pytest.raises(EngineTimeout):
        ClingoEngine(prog).run({}, timeout=0.3)


@pytest.mark.parametrize("engine", ["embedded", "souffle"])
@pytest.mark.parametrize("text, line", [
    (".decl q(x:float)\n", 1),
    (".decl q(x:number)\n.decl r(x:number)\nq(x) :- r(y), x = y / y.\n", 3),
    (".decl q(x:number)\nq($).\n", 2),
    (".decl q(x:number)\n.output nothere\n", 2),
    (".type P = [a:weird]\n.decl q(x:P)\n", 1),
])
def test_outside_profile_rejected_before_any_engine(tmp_path, ave, engine, text, line):
    """Exit 4 with file:line:col on both engines; the linter runs first, so souffle is never started."""
    (tmp_path / "bad.dl").write_text(text)
    r = ave("check", "--engine", engine, "--rules", tmp_path, EXAMPLES / "gemm_naive.ave")
    assert r.code == 4, r.out
    assert r.out.startswith(f"{tmp_path / 'bad.dl'}:{line}:"), r.out
