"""The Soufflé subprocess engine itself (needs a live souffle; skipped with the reason otherwise)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES

from ave_decl.datalog.lint import lint
from ave_decl.datalog.loader import load_program
from ave_decl.datalog.souffle_engine import EngineTimeout, EngineUnavailable, SouffleEngine, find_souffle
from ave_decl.lang.errors import RuleError

needs_souffle = pytest.mark.skipif(find_souffle() is None, reason="souffle is not installed (PATH or AVE_SOUFFLE)")


def _prog(tmp_path: Path, text: str, name: str = "p.dl"):
    f = tmp_path / name
    f.write_text(text)
    prog = load_program([f])
    lint(prog)
    return prog, f


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("ave-souffle-*")}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> None:
    """Temporary directories of this test only: another run on the machine cannot change the count."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))


def test_missing_binary_is_a_usage_error(tmp_path, monkeypatch, ave):
    monkeypatch.setenv("AVE_SOUFFLE", str(tmp_path / "no-such-souffle"))
    assert find_souffle() is None
    with pytest.raises(EngineUnavailable):
        SouffleEngine(_prog(tmp_path, ".decl a(x:number)\n")[0])
    r = ave("check", "--engine", "souffle", EXAMPLES / "gemm_naive.ave")
    assert r.code == 2 and "souffle was not found" in r.out


@needs_souffle
def test_runs_with_empty_inputs_and_cleans_up(tmp_path, private_tmp):
    before = _leftovers()
    prog, _ = _prog(tmp_path, ".decl e(a:number, b:number)\n.decl p(a:number)\n.input e\np(x) :- e(x, _).\n"
                              ".output p\n")
    eng = SouffleEngine(prog)
    assert eng.run({}) == {"p": []}  # e.facts is written although empty
    assert eng.run({"e": [(1, 2), (3, 4)]}) == {"p": [(1,), (3,)]}
    assert _leftovers() == before


@needs_souffle
def test_runtime_error_maps_to_rule_file_and_line(tmp_path):
    prog, f = _prog(tmp_path, ".decl s(x:symbol)\n.decl r(x:number)\ns(\"abc\").\nr(to_number(x)) :- s(x).\n"
                              ".output r\n", "mine.dl")
    with pytest.raises(RuleError) as info:
        SouffleEngine(prog).run({})
    assert info.value.span is not None
    assert Path(info.value.span.path).name == "mine.dl" and info.value.span.line == 4


@needs_souffle
def test_timeout_kills_and_cleans_up(tmp_path, private_tmp):
    before = _leftovers()
    prog, _ = _prog(tmp_path, ".decl n(x:number)\nn(0).\nn(x + 1) :- n(x), x < 100000000.\n.output n\n")
    with pytest.raises(EngineTimeout):
        SouffleEngine(prog).run({}, timeout=0.5)
    assert _leftovers() == before


@needs_souffle
def test_word_size_is_checked():
    from ave_decl.datalog.souffle_engine import _version, check_binary

    assert "Word size: 32 bits" in _version(find_souffle())
    check_binary(find_souffle())  # a 64-bit build would raise EngineUnavailable
