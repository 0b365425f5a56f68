"""The on-disk build cache (lang/build_cache.py): parse tables and linted rule programs are read
back as typed JSON, equal to what a fresh build makes; a bad or hostile entry is rebuilt, never
trusted; a change of the input makes a new entry."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ave_decl.datalog import ruleset
from ave_decl.datalog.loader import load_program
from ave_decl.lang import build_cache
from ave_decl.lang.build_cache import Undecodable, cached, decode, encode
from ave_decl.lang.resources import rules_dir

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private cache folder; the in-process memo of rule sets is emptied around the test."""
    monkeypatch.setenv("AVE_BUILD_CACHE", str(tmp_path / "build"))
    ruleset._load.cache_clear()
    yield tmp_path / "build"
    ruleset._load.cache_clear()


@dataclass(frozen=True)
class _Point:
    x: int
    tags: tuple[str, ...]


def test_encode_decode_keeps_types():
    value = {"t": (1, (2, 3)), 4: [None, True, 1.5], "s": {"b", "a"}, "f": frozenset({3, 1}),
             "p": _Point(1, ("a", "b")), "$t": "not a tag"}
    data = json.loads(json.dumps(encode(value)))
    assert decode(data, {"_Point": _Point}) == value
    back = decode(data, {"_Point": _Point})
    assert isinstance(back["t"], tuple) and isinstance(back["s"], set) and isinstance(back["f"], frozenset)


@pytest.mark.parametrize("data", [
    ["$Popen", ["l", "sh"]],  # a class outside the allowlist is never constructed
    ["$_Point", 1, ["t"], 2],  # more fields than the class has
    ["$_Point", 1],  # fewer
    ["q"], ["t", {"x": 1}], ["d", 1], [], {"$t": []}, [1, 2], ["s", ["l"]],  # an unhashable member
])
def test_decode_refuses_what_it_does_not_write(data):
    with pytest.raises(Undecodable):
        decode(data, {"_Point": _Point})


def test_a_bad_entry_is_rebuilt_and_replaced(cache):
    builds = []

    def build():
        builds.append(1)
        return (1, 2)

    args = ("unit", "k1", build, encode, lambda d: decode(d, {}))
    assert cached(*args) == (1, 2) and len(builds) == 1
    assert cached(*args) == (1, 2) and len(builds) == 1  # read back
    entry = cache / "unit" / "k1.json"
    for garbage in ("{not json", json.dumps({"key": "k1", "data": ["$Popen"]}),
                    json.dumps({"key": "other", "data": ["t", 9, 9]}), "[]"):
        entry.write_text(garbage)
        assert cached(*args) == (1, 2)
    assert len(builds) == 5
    assert json.loads(entry.read_text())["key"] == "k1"


def test_old_entries_are_pruned(cache):
    for i in range(build_cache.KEEP + 5):
        cached("unit", f"k{i}", lambda: i, encode, lambda d: d)
    assert len(list((cache / "unit").glob("*.json"))) == build_cache.KEEP


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AVE_BUILD_CACHE", "off")
    assert build_cache.cache_dir() is None
    assert cached("unit", "k", lambda: 7, encode, lambda d: d) == 7
    assert not any(tmp_path.iterdir())


def test_cached_rule_program_equals_a_fresh_build(cache):
    first = ruleset.load_rules()
    assert list((cache / "rules").glob("*.json")), "the linted program was not written"
    ruleset._load.cache_clear()
    second = ruleset.load_rules()  # read back from the entry
    fresh = load_program([rules_dir()])
    assert second == fresh == first
    assert [r.span for r in second.rules] == [r.span for r in fresh.rules]  # spans do not compare in ==
    assert [m.spans for m in second.files] == [m.spans for m in fresh.files]


def test_a_changed_rule_file_gets_a_new_entry(cache, tmp_path):
    rules = tmp_path / "extra"
    rules.mkdir()
    (rules / "mine.dl").write_text("// @id my/one\n// @title t\n// @severity warning\n"
                                   ".decl mine(k: number)\nmine(k) :- entry(k, _).\n")
    ruleset.load_rules((str(rules),))
    before = set((cache / "rules").glob("*.json"))
    (rules / "mine.dl").write_text((rules / "mine.dl").read_text().replace("my/one", "my/two"))
    ruleset._load.cache_clear()
    prog = ruleset.load_rules((str(rules),))
    assert "my/two" in ruleset.rule_metadata(prog)
    assert len(set((cache / "rules").glob("*.json")) - before) == 1


def test_cached_parsers_parse_every_example_alike(tmp_path):
    """In fresh processes: without the cache, then twice with it (writing, then reading)."""
    script = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from ave_decl.lang.parser import parse_source\n"
        "from ave_decl.lang.source import SourceFile\n"
        "h = hashlib.sha256()\n"
        "for p in sorted(Path('examples').rglob('*.ave')):\n"
        "    h.update(repr(parse_source(SourceFile.read(p))).encode())\n"
        "print(h.hexdigest())\n")
    outs = []
    for setting in ("off", str(tmp_path / "c"), str(tmp_path / "c")):
        env = {"AVE_BUILD_CACHE": setting, "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                             check=True)
        outs.append(out.stdout.strip())
    assert outs[0] == outs[1] == outs[2]
    assert len(list((tmp_path / "c" / "lark").glob("*.json"))) >= 1


def test_warm_up_builds_every_lexer_scanner_an_audit_worker_would_build():
    """pipeline.warm_up (run before an audit forks its workers) leaves no scanner of the kernel or
    reference grammar to build lazily: this reads Lark's lexer objects, so a Lark release that
    moves them fails here rather than silently costing every worker its scanners again."""
    from ave_decl.lang import parser, reference
    from ave_decl.pipeline import Options, warm_up

    warm_up(Options())
    for lark in (parser._lark(), reference._lark()):
        lexer = lark.parser.lexer
        lexer = getattr(lexer, "lexer", lexer)
        assert lexer.lexers and all(basic._scanner is not None for basic in lexer.lexers.values())
