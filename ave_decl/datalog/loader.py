"""Read `.dl` files (Soufflé syntax) into a Program; errors carry the `.dl` file:line:col."""
from __future__ import annotations

import itertools
import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, v_args
from lark.exceptions import UnexpectedInput, VisitError

from ..lang.errors import RuleError
from ..lang.lark_spans import SpanTransformer
from ..lang.build_cache import lark_parser
from ..lang.resources import grammar_path
from ..lang.source import Span
from .files import INCLUDE as _INCLUDE
from .files import included_files, includes_of, listed_files
from .program import (AdtTerm, Aggregate, Atom, BinTerm, Constraint, Decl, Functor, Nil, Num, Program, Record, Rule,
                      RuleFileMeta, Sym, UnTerm, Var, Wild)

_META = re.compile(r"^\s*//\s*@(\w[\w-]*)\s+(.*?)\s*$")
_CONTINUED = re.compile(r"^\s*//\s{2,}(\S.*?)\s*$")  # an indented comment line continues the field above
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return lark_parser(grammar_path("souffle.lark"), propagate_positions=True, maybe_placeholders=False)


class _Build(SpanTransformer):

    def _unsupported(self, what: str, span: Span):
        raise RuleError(f"{what} is outside the portable Soufflé profile (see docs/engines.md)", span)

    def start(self, items):
        return items

    def subtype(self, items):
        return ("type", str(items[0]), str(items[1]), self._tok(items[0]))

    def type_alias(self, items):
        if len(items) > 2:
            return ("union", str(items[0]), [str(i) for i in items[1:]], self._tok(items[0]))
        return ("type", str(items[0]), str(items[1]), self._tok(items[0]))

    def record_type(self, items):
        name, *attrs = items
        return ("record", str(name), tuple(attrs), self._tok(name))  # span kept for lint messages

    def adt_type(self, items):
        name, *branches = items
        return ("adt", str(name), dict(branches), self._tok(name))

    def adt_branch(self, items):
        name, *attrs = items
        return (str(name), tuple(attrs))

    def adt_term(self, items):
        name, *args = items
        return AdtTerm(str(name), tuple(args))

    @v_args(meta=True)
    def rel_decl(self, meta, items):
        name = items[0]
        attrs = tuple(i for i in items[1:] if isinstance(i, tuple))
        for q in items[1:]:
            if isinstance(q, Token) and str(q) not in ("inline", "btree", "brie", "magic", "no_magic", "no_inline",
                                                       "eqrel"):
                self._unsupported(f"relation qualifier '{q}'", self._tok(q))
        eqrel = any(isinstance(q, Token) and str(q) == "eqrel" for q in items[1:])
        if eqrel and (len(attrs) != 2 or attrs[0][1] != attrs[1][1]):
            raise RuleError("an eqrel relation needs two attributes of one type", self._tok(name))
        return ("decl", Decl(str(name), attrs, self._tok(name), eqrel))

    def attr(self, items):
        return (str(items[0]), str(items[1]))

    def qualifier(self, items):
        return items[0]

    def io_decl(self, items):
        kw, *rest = items
        names = [t for t in rest if isinstance(t, Token) and t.type == "IDENT"]
        params = [p for p in rest if isinstance(p, tuple)]
        for key, value in params:
            if key == "IO" and value != "file":
                self._unsupported(f"IO={value}", self._tok(kw))
            if key in ("rfc4180", "compress", "columns", "headers"):
                self._unsupported(f"I/O parameter '{key}'", self._tok(kw))
        return ("io", str(kw), [(str(n), self._tok(n)) for n in names])

    def io_param(self, items):
        return (str(items[0]), str(items[1]).strip('"'))

    def unsupported_directive(self, items):
        word = str(items[0]).split()[0]
        self._unsupported(f"directive '{word}'", self._tok(items[0]))

    @v_args(meta=True)
    def fact(self, meta, items):
        return ("rule", [Rule((items[0],), (), self._span(meta))])

    @v_args(meta=True)
    def rule(self, meta, items):
        heads, disjuncts = items
        span = self._span(meta)
        return ("rule", [Rule(tuple(heads), tuple(conj), span) for conj in disjuncts])

    def head(self, items):
        return list(items)

    def body(self, items):
        # each item is a list of conjunctions (DNF); a disjunction concatenates them
        return [conj for alt in items for conj in alt]

    def disjunct(self, items):
        # each literal is a list of conjunctions; the conjunction is their cross product
        options = [[[]]]
        for lit in items:
            options.append(lit if isinstance(lit, list) else [[lit]])
        return [sum(combo, []) for combo in itertools.product(*options)]

    def paren_body(self, items):
        return items[0]

    def negation(self, items):
        a = items[0]
        return Atom(a.name, a.args, a.span, negated=True)

    @v_args(meta=True)
    def constraint(self, meta, items):
        left, op, right = items
        return Constraint(str(op), left, right, self._span(meta))

    @v_args(meta=True)
    def true_lit(self, meta, items):
        return Constraint("=", Num(0), Num(0), self._span(meta))

    @v_args(meta=True)
    def false_lit(self, meta, items):
        return Constraint("!=", Num(0), Num(0), self._span(meta))

    def atom(self, items):
        name, *args = items
        return Atom(str(name), tuple(args), self._tok(name))

    def _fold(self, items):
        left = items[0]
        for i in range(1, len(items), 2):
            left = BinTerm(str(items[i]), left, items[i + 1])
        return left

    lor_term = lxor_term = land_term = bor_term = bxor_term = band_term = shift_term = sum_term = prod_term = _fold

    def power_term(self, items):
        return BinTerm("^", items[0], items[1])

    def neg(self, items):
        if isinstance(items[0], Num):
            return Num(-items[0].value)
        return UnTerm("-", items[0])

    def bnot(self, items):
        return UnTerm("bnot", items[0])

    def lnot(self, items):
        return UnTerm("lnot", items[0])

    def number(self, items):
        tok = items[0]
        text = str(tok)
        if "." in text or text.endswith("u"):
            self._unsupported(f"float/unsigned literal {text}", self._tok(tok))
        value = int(text, 0)
        if not INT_MIN <= value <= INT_MAX:
            raise RuleError(f"number {text} does not fit in 32 bits", self._tok(tok))
        return Num(value)

    def string(self, items):
        raw = str(items[0])[1:-1]
        value = raw.encode("utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8")
        if "\t" in value or "\n" in value:
            self._unsupported("a symbol with a tab or newline (facts and outputs are tab-separated lines)",
                              self._tok(items[0]))
        return Sym(value)

    def wildcard(self, items):
        return Wild()

    def variable(self, items):
        return Nil() if str(items[0]) == "nil" else Var(str(items[0]))

    def functor_literal(self, items):
        name, *args = items
        if str(name) != "contains":
            self._unsupported(f"functor '{name}' as a literal", self._tok(name))
        return Constraint("=", Functor("contains", tuple(args)), Num(1), self._tok(name))

    def functor(self, items):
        name, *args = items
        if str(name) not in ("min", "max", "cat", "strlen", "substr", "to_number", "to_string"):
            self._unsupported(f"functor '{name}'", self._tok(name))
        return Functor(str(name), tuple(args))

    def aggregate(self, items):
        kind_tok, (target, body) = items
        kind = str(kind_tok)
        if kind == "mean":
            self._unsupported("aggregate 'mean' (a float)", self._tok(kind_tok))
        if kind == "count" and target is not None:
            raise RuleError("count takes no target expression", self._tok(kind_tok))
        if kind != "count" and target is None:
            raise RuleError(f"{kind} needs a target expression: {kind} x : {{...}}", self._tok(kind_tok))
        return Aggregate(kind, target, body)

    @v_args(meta=True)
    def aggregate_body(self, meta, items):
        target = items[0] if len(items) == 2 else None
        inner = items[-1]
        if isinstance(inner, Atom):
            return target, (inner,)
        if len(inner) != 1:
            raise RuleError("a disjunction inside an aggregate is outside the portable profile", self._span(meta))
        return target, tuple(inner[0])

    def cast(self, items):
        return items[0]

    @v_args(meta=True)
    def autoinc(self, meta, items):
        raise RuleError("autoinc() / $ is outside the portable Soufflé profile", self._span(meta))

    def record(self, items):
        return Record(tuple(items))

    def user_functor(self, items):
        self._unsupported(f"user-defined functor '@{items[0]}'", self._tok(items[0]))


def expand_includes(path: Path, seen: tuple[Path, ...] = ()) -> list[tuple[str, int, str]]:
    """Lines of a file with `#include "x"` resolved: (file, line number, text)."""
    if path in seen:
        raise RuleError(f"#include cycle through {path}", Span(str(path), 1, 1, 1, 2))
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _INCLUDE.match(line)
        if m:
            target = (path.parent / m.group(1)).resolve()
            if not target.is_file():
                raise RuleError(f"#include file not found: {m.group(1)}", Span(str(path), n, 1, n, len(line) + 1))
            out.extend(expand_includes(target, seen + (path,)))
            out.append((str(path), n, ""))
        elif line.lstrip().startswith("#"):
            raise RuleError("only #include is supported from the C preprocessor", Span(str(path), n, 1, n, len(line) + 1))
        else:
            out.append((str(path), n, line))
    return out


def parse_file(path: Path) -> tuple[list, RuleFileMeta]:
    """Parse one `.dl` file into items and its metadata header."""
    text = path.read_text(encoding="utf-8")
    meta = RuleFileMeta(str(path))
    last: str | None = None  # the field an indented comment line continues
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            last = None
            continue
        m = _META.match(line)
        more = _CONTINUED.match(line)
        if m:
            key, value = m.groups()
            meta.fields[key] = (meta.fields.get(key, "") + " " + value).strip() if key in meta.fields else value
            meta.spans.setdefault(key, Span(str(path), n, line.index("@") + 1, n, len(line) + 1))
            last = key
        elif more and last is not None:
            meta.fields[last] = (meta.fields[last] + " " + more.group(1)).strip()
        elif line.strip().startswith("//"):
            last = None
            continue
        else:
            break
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#") and not _INCLUDE.match(line):
            raise RuleError("only #include is supported from the C preprocessor", Span(str(path), n, 1, n, len(line) + 1))
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        line, col = max(getattr(exc, "line", 1), 1), max(getattr(exc, "column", 1), 1)
        tok = getattr(exc, "token", None)
        what = "end of file" if tok is None or tok.type == "$END" else repr(str(tok))
        raise RuleError(f"syntax error in rule file: unexpected {what}", Span(str(path), line, col, line, col + 1)) \
            from None
    try:
        items = _Build(str(path)).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, RuleError):
            raise exc.orig_exc from None
        raise
    return items, meta


def load_program(dirs: list[Path]) -> Program:
    """Every `.dl` file under the given directories (sorted, recursive), merged into one Program."""
    prog = Program()
    files = listed_files(dirs)
    included = included_files(files)
    for path in files:
        if path.resolve() in included:
            continue
        items, meta = parse_file(path)
        prog.files.append(meta)
        for item in items:
            _add(prog, item, path)
        for inc in includes_of(path):
            inc_items, _ = parse_file(inc)
            for item in inc_items:
                _add(prog, item, inc)
    return prog


def _add(prog: Program, item, path: Path) -> None:
    kind = item[0]
    if kind == "decl":
        decl = item[1]
        if decl.name in prog.decls:
            raise RuleError(f"relation {decl.name} is declared twice (first at {prog.decls[decl.name].span})", decl.span)
        prog.decls[decl.name] = decl
    elif kind == "type":
        prog.types[item[1]] = item[2]
    elif kind == "union":
        prims = {prog.primitive(t) for t in item[2]}
        if len(prims) != 1:
            raise RuleError(f"union type {item[1]} mixes primitive types {sorted(prims)}", item[3])
        prog.unions[item[1]] = tuple(item[2])
        prog.types[item[1]] = prims.pop()
    elif kind == "record":
        prog.records[item[1]] = item[2]
        prog.type_spans[item[1]] = item[3]
    elif kind == "adt":
        prog.adts[item[1]] = item[2]
        prog.type_spans[item[1]] = item[3]
        for branch in item[2]:
            if branch in prog.branches:
                raise RuleError(f"ADT branch {branch} is defined twice", item[3])
            prog.branches[branch] = item[1]
    elif kind == "io":
        target = prog.inputs if item[1] == ".input" else prog.outputs
        for name, span in item[2]:
            target.add(name)
            prog.io_spans.setdefault(name, span)
    elif kind == "rule":
        prog.rules.extend(item[1])
