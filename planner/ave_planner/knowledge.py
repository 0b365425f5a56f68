"""The knowledge base: one optimization technique per TOML file, validated on load.

A technique is data (docs/knowledge-base.md): what it does (for an engineer and for an LLM
prompt), when it applies (a Datalog query over the kernel's facts, asked with the same engines
as the invariants), its parameters and their domains, the named rewrite that performs it, the
invariants the rewritten kernel must carry and prove, and its expected effect on the model.
Files are untrusted input: every fault is one line with `file:line:col`, never a traceback.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ave_decl

from .errors import KnowledgeError
from .model import TERMS

TARGETS = ("amdgpu", "nvptx", "host")
# "gemm" / "attention": re-renders a recognised GEMM / attention recipe; "recipe": either;
# "any": an AST rewrite of any kernel
FAMILIES = ("gemm", "attention", "recipe", "any")
_FIELDS = {"id", "title", "description", "family", "targets", "rewrite", "precondition", "parameters",
           "invariants", "effect"}
_RELATION = re.compile(r"[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class Technique:
    id: str
    title: str
    description: str
    family: str
    targets: tuple[str, ...]
    rewrite: str
    relation: str  # the precondition relation (first column: the kernel)
    rules: str  # its Datalog text
    rules_line: int  # the line of the file where `rules` starts (for error locations)
    parameters: dict[str, tuple | dict[str, tuple]]  # name -> domain (or target -> domain), in file order
    templates: tuple[str, ...]  # tag/assert text the rewrite inserts
    must_prove: tuple[str, ...]  # invariant ids with at least one VERIFIED obligation
    effect: str
    lowers: tuple[str, ...]  # model terms the technique is expected to lower
    path: str
    tolerance: float | None = None  # the largest reference tolerance a rewritten kernel may declare

    def domain(self, name: str, target: str) -> tuple:
        d = self.parameters[name]
        return tuple(d.get(target, ())) if isinstance(d, dict) else d

    def prompt(self, target: str) -> str:
        """The entry as an LLM planner reads it (the domains offered on `target`)."""
        params = ", ".join(f"{k} in {list(self.domain(k, target))}" for k in self.parameters) or "none"
        return (f"- {self.id}: {self.title}. {self.description.strip()} Parameters: {params}. "
                f"Must prove: {', '.join(self.must_prove)}. Expected effect: {self.effect.strip()}")


def package_data(name: str) -> Path:
    """The checkout's planner/NAME (editable install), else the installed share dir's."""
    here = Path(__file__).resolve().parent.parent / name
    if here.is_dir():
        return here
    import sys

    return Path(sys.prefix) / "share" / "ave-planner" / name


def knowledge_dir() -> Path:
    return package_data("knowledge")


def load_knowledge(directory: str | Path | None = None, rewrites: dict | None = None,
                   schemas: dict | None = None) -> dict[str, Technique]:
    """Every `*.toml` of the directory (sorted), validated; id -> Technique. `schemas`: the
    parameters each rewrite accepts (default ave_planner.rewrites.PARAMETERS; a rewrite without
    one accepts any integer or string values)."""
    from .rewrites import PARAMETERS, REWRITES

    d = Path(directory) if directory is not None else knowledge_dir()
    if not d.is_dir():
        raise KnowledgeError(f"knowledge base not found: {d}", str(d))
    known = ave_decl.invariants()
    out: dict[str, Technique] = {}
    for path in sorted(d.glob("*.toml")):
        t = parse_technique(path, known, REWRITES if rewrites is None else rewrites,
                            PARAMETERS if schemas is None else schemas)
        out[t.id] = t
    if not out:
        raise KnowledgeError(f"no technique (*.toml) in {d}", str(d))
    return out


def parse_technique(path: Path, invariant_ids: dict, rewrites: dict, schemas: dict | None = None) -> Technique:
    text = _read(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (1, 1)
        raise KnowledgeError(f"not valid TOML: {str(exc).split(' (at line')[0]}", str(path), line, col) from None
    where = _Locator(str(path), text)
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise where.error(unknown[0], f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(_FIELDS))})")
    for key in sorted(_FIELDS - {"parameters"}):
        if key not in data:
            raise KnowledgeError(f"missing field {key!r}", str(path), 1, 1)
    tid = _string(data, "id", where)
    if tid != path.stem:
        raise where.error("id", f"id {tid!r} is not the file's name {path.stem!r}")
    family = _string(data, "family", where)
    if family not in FAMILIES:
        raise where.error("family", f"family {family!r} is not one of {', '.join(FAMILIES)}")
    targets = _strings(data, "targets", where)
    bad = [t for t in targets if t not in TARGETS]
    if bad or not targets:
        raise where.error("targets", f"targets must be a non-empty subset of {', '.join(TARGETS)}")
    rewrite = _string(data, "rewrite", where)
    if rewrite not in rewrites:
        raise where.error("rewrite",
                          f"unknown rewrite {rewrite!r} (ave_planner.rewrites: {', '.join(sorted(rewrites))})")
    pre = _table(data, "precondition", where, {"relation", "rules"})
    relation = _string(pre, "relation", where)
    if not _RELATION.match(relation):
        raise where.error("relation", f"relation name {relation!r} is not a Datalog identifier")
    rules = _string(pre, "rules", where)
    for n, ln in enumerate(rules.split("\n")):
        if ln.lstrip().startswith("#"):
            raise KnowledgeError("a precondition is one self-contained rule text: no #include or other # line",
                                 str(path), where.value_line("rules") + n, 1)
    if not re.search(rf"\.decl\s+{re.escape(relation)}\s*\(\s*\w+\s*:\s*Kernel\b", rules):
        raise where.error("rules", f"the rules must declare `.decl {relation}(k:Kernel, ...)`")
    raw = data.get("parameters", {})
    if not isinstance(raw, dict):
        raise where.error("parameters", "'parameters' must be a table ([parameters])")
    schema = (schemas or {}).get(rewrite)
    if schema is not None and set(raw) != set(schema):
        missing, extra = sorted(set(schema) - set(raw)), sorted(set(raw) - set(schema))
        key = extra[0] if extra else "parameters"
        what = f"unknown parameter {extra[0]!r}" if extra else f"missing parameter {missing[0]!r}"
        raise where.error(key, f"{what} for rewrite {rewrite!r} (it takes {', '.join(sorted(schema))})")
    params: dict[str, tuple | dict[str, tuple]] = {}
    for name, domain in raw.items():
        per_target = domain if isinstance(domain, dict) else None
        if per_target is not None and set(per_target) != set(targets):
            raise where.error(name, f"parameter {name!r}: a table of domains gives one for each target "
                                    f"({', '.join(targets)})")
        for d in (per_target.values() if per_target is not None else [domain]):
            if not isinstance(d, list) or not d or not all(isinstance(v, (int, str)) and not isinstance(v, bool)
                                                           for v in d):
                raise where.error(name, f"parameter {name!r}: a domain is a non-empty list of integers or strings "
                                        "(or a table of them by target)")
            bad_values = [v for v in d if schema is not None and v not in schema[name]]
            if bad_values:
                raise where.error(name, f"parameter {name!r}: {bad_values[0]!r} is not one of "
                                        f"{', '.join(map(str, schema[name]))}")
        params[name] = {k: tuple(v) for k, v in per_target.items()} if per_target is not None else tuple(domain)
    inv = _table(data, "invariants", where, {"templates", "must_prove"})
    templates = _strings(inv, "templates", where)
    must_prove = _strings(inv, "must_prove", where)
    if not must_prove:
        raise where.error("must_prove", "'must_prove' names at least one invariant (else the gate proves nothing)")
    for rid in must_prove:
        if rid not in invariant_ids:
            raise where.error("must_prove", f"unknown invariant {rid!r} (rules/invariants/*.dl headers)")
    eff = _table(data, "effect", where, {"summary", "lowers"}, optional={"tolerance"})
    tolerance = eff.get("tolerance")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 < tolerance <= 0.1):
        raise where.error("tolerance", "'tolerance' must be a number in (0, 0.1]")
    lowers = _strings(eff, "lowers", where)
    if not lowers:
        raise where.error("lowers", "'lowers' names at least one model term")
    for term in lowers:
        if term not in TERMS:
            raise where.error("lowers", f"unknown model term {term!r} (one of {', '.join(TERMS)})")
    return Technique(tid, _string(data, "title", where), _string(data, "description", where), family,
                     tuple(targets), rewrite, relation, rules, where.value_line("rules"), params, tuple(templates),
                     tuple(must_prove), _string(eff, "summary", where), tuple(lowers), str(path),
                     None if tolerance is None else float(tolerance))


def _read(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise KnowledgeError(f"cannot read: {exc.strerror}", str(path)) from None
    if len(raw) > 256 * 1024:
        raise KnowledgeError("a technique file is at most 256 KiB", str(path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KnowledgeError("not UTF-8 text", str(path), 1, exc.start + 1) from None


class _Locator:
    """Where a key is written (tomllib keeps no positions): the first line assigning it."""

    def __init__(self, path: str, text: str):
        self.path, self.lines = path, text.split("\n")

    def line_of(self, key: str) -> tuple[int, int]:
        pat = re.compile(rf"^(\s*)(\[)?{re.escape(key)}\b")
        for n, ln in enumerate(self.lines, 1):
            m = pat.match(ln)
            if m:
                return n, len(m.group(1)) + 1
        return 1, 1

    def value_line(self, key: str) -> int:
        """The first line of a multi-line string value (the line after `key = '''`)."""
        n, _ = self.line_of(key)
        first = self.lines[n - 1] if n <= len(self.lines) else ""
        return n + 1 if first.rstrip().endswith(("'''", '"""')) else n

    def error(self, key: str, message: str) -> KnowledgeError:
        line, col = self.line_of(key)
        return KnowledgeError(message, self.path, line, col)


def _table(data: dict, key: str, where: _Locator, fields: set[str], optional: set[str] = frozenset()) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise where.error(key, f"{key!r} must be a table ([{key}])")
    unknown = sorted(set(value) - fields - optional)
    if unknown:
        raise where.error(unknown[0], f"unknown field {unknown[0]!r} in [{key}] (fields: {', '.join(sorted(fields))})")
    missing = sorted(fields - set(value))
    if missing:
        raise where.error(key, f"[{key}] lacks {missing[0]!r}")
    return value


def _string(data: dict, key: str, where: _Locator) -> str:
    value: Any = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise where.error(key, f"{key!r} must be a non-empty string")
    return value


def _strings(data: dict, key: str, where: _Locator) -> list[str]:
    value: Any = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(key, f"{key!r} must be a list of strings")
    return list(value)
