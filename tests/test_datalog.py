"""The Soufflé-profile front end and the embedded clingo engine, on real clingo (no mocks)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ave_decl.datalog.clingo_engine import ClingoEngine
from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
from ave_decl.errors import RuleError

from conftest import EXAMPLES


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
    (".decl a(x:number)\n.decl b(x:number)\na(c) :- b(x), c = count : b(_).\n", "aggregate", 3),
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
        "// @severity warning\n"
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
    assert mine[0]["severity"] == "warning" and mine[0]["verdict"] == "VIOLATION"
    assert r.code == 1


def test_rules_lint_command(ave):
    r = ave("rules", "lint")
    assert r.code == 0 and r.out.startswith("ok:")
