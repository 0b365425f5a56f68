"""The embedded engine: the portable Soufflé profile translated to gringo and run by clingo.

All clingo calls live in this module (clingo 6 will change the Python API). Traps handled,
from ../shared/reference/datalog-engines.md: mangled predicate/variable names (`_y` is a
constant in gringo), `%` is `\\`, `^` is power (gringo `**`), `bxor` is gringo `^`, shifts and
min/max/string functors are `@`-functions with Soufflé's 32-bit semantics, literals are
range-checked by the loader, exactly one model is asserted.
"""
from __future__ import annotations

import clingo

from ..lang.errors import RuleError
from .lint import aggregates_in, inner_vars, literal_terms
from .program import (AdtTerm, Aggregate, Atom, BinTerm, Constraint, Functor, Nil, Num, Program, Record, Rule, Sym,
                      Term, UnTerm, Var, Wild, rewrite_term)
from .worker import run_in_worker

_BINOPS = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "\\", "^": "**", "band": "&", "bor": "?", "bxor": "^"}
_CALL_BINOPS = {"bshl", "bshr", "bshru", "land", "lor", "lxor"}


def _wrap32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


class _Functors:
    """`@`-functions reproducing Soufflé 2.5 (32-bit) semantics."""

    @staticmethod
    def _n(s: clingo.Symbol) -> int:
        return s.number

    def bshl(self, a, b):
        return clingo.Number(_wrap32((self._n(a) & 0xFFFFFFFF) << (self._n(b) & 31)))

    def bshr(self, a, b):
        return clingo.Number(self._n(a) >> (self._n(b) & 31))

    def bshru(self, a, b):
        return clingo.Number(_wrap32((self._n(a) & 0xFFFFFFFF) >> (self._n(b) & 31)))

    def land(self, a, b):
        return clingo.Number(int(bool(self._n(a)) and bool(self._n(b))))

    def lor(self, a, b):
        return clingo.Number(int(bool(self._n(a)) or bool(self._n(b))))

    def lxor(self, a, b):
        return clingo.Number(int(bool(self._n(a)) != bool(self._n(b))))

    def lnot(self, a):
        return clingo.Number(int(not self._n(a)))

    def min(self, *args):
        return clingo.Number(min(self._n(a) for a in args))

    def max(self, *args):
        return clingo.Number(max(self._n(a) for a in args))

    def cat(self, *args):
        return clingo.String("".join(a.string for a in args))

    def strlen(self, a):
        return clingo.Number(len(a.string.encode("utf-8")))

    def to_string(self, a):
        return clingo.String(str(a.number))

    def contains(self, a, b):
        return clingo.Number(int(a.string in b.string))

    def substr(self, s, i, n):
        data, start, length = s.string.encode("utf-8"), i.number, n.number
        if start < 0 or start > len(data) or length < 0:
            return clingo.String("")  # Soufflé warns and yields "" for an out-of-range index
        return clingo.String(data[start:start + length].decode("utf-8", errors="replace"))

    def __init__(self, rules: list[Rule] | None = None):
        self.rules = rules or []
        self.failure: RuleError | None = None  # kept here: clingo re-wraps a callback's exception

    def to_number(self, s, rule_index=None):
        text = s.string.strip()
        try:
            value = int(text, 16) if text.lower().startswith(("0x", "-0x")) else (
                int(text, 2) if text.lower().startswith(("0b", "-0b")) else int(text, 10))
        except ValueError:
            span = self.rules[rule_index.number].span if rule_index is not None and self.rules else None
            self.failure = RuleError(f"wrong string provided by to_number({s.string!r}) functor (runtime error)", span)
            raise self.failure from None
        return clingo.Number(_wrap32(value))


def pred(name: str) -> str:
    return "r_" + name.replace(".", "__").replace("?", "_q")


def _var(name: str) -> str:
    return "V_" + name.replace("?", "_q")


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_RULE_INDEX = [0]  # the rule being translated (set by translate())


def _term(t: Term) -> str:
    if isinstance(t, Aggregate):
        raise RuleError("internal: an aggregate reached term translation", None)
    if isinstance(t, Var):
        return _var(t.name)
    if isinstance(t, Wild):
        return "_"
    if isinstance(t, Num):
        return str(t.value) if t.value >= 0 else f"({t.value})"
    if isinstance(t, Sym):
        return _string(t.value)
    if isinstance(t, BinTerm):
        if t.op in _CALL_BINOPS:
            return f"@{t.op}({_term(t.left)},{_term(t.right)})"
        return f"({_term(t.left)}{_BINOPS[t.op]}{_term(t.right)})"
    if isinstance(t, UnTerm):
        if t.op == "-":
            return f"(-{_term(t.operand)})"
        if t.op == "bnot":
            return f"(~{_term(t.operand)})"
        return f"@lnot({_term(t.operand)})"
    if isinstance(t, Record):  # a record is a gringo tuple; Soufflé's nil is the constant nil
        inner = ",".join(_term(a) for a in t.args)
        return f"({inner},)" if len(t.args) == 1 else f"({inner})"
    if isinstance(t, Nil):
        return "nil"
    if isinstance(t, AdtTerm):
        return f"c_{t.branch}({','.join(_term(a) for a in t.args)})" if t.args else f"c_{t.branch}"
    if isinstance(t, Functor):
        args = [_term(a) for a in t.args]
        if t.name == "to_number":  # can fail at run time: pass the rule's index for the error location
            args.append(str(_RULE_INDEX[0]))
        return f"@{t.name}({','.join(args)})"
    raise RuleError(f"term {t!r} is not supported by the embedded engine", None)


def _atom(a: Atom) -> str:
    inner = f"{pred(a.name)}({','.join(_term(x) for x in a.args)})" if a.args else pred(a.name)
    return f"not {inner}" if a.negated else inner


def _literal(lit) -> str:
    if isinstance(lit, Atom):
        return _atom(lit)
    assert isinstance(lit, Constraint)
    return f"{_term(lit.left)}{lit.op}{_term(lit.right)}"


class _Fresh:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"V__{prefix}{self.n}"


def _rename_wild(t: Term, fresh: _Fresh, names: list[str]) -> Term:
    def rename(x: Term) -> Term | None:
        if isinstance(x, Wild):
            names.append(fresh("w"))
            return Var(names[-1][2:])  # _var() adds the V_ prefix back
        return None

    return rewrite_term(t, rename)


def _aggregate(agg: Aggregate, result: str, outside: set[str], fresh: _Fresh) -> list[str]:
    """Soufflé counts/sums per body tuple: every local variable goes into the gringo tuple."""
    wild: list[str] = []
    body = []
    for lit in agg.body:
        if isinstance(lit, Atom):
            body.append(Atom(lit.name, tuple(_rename_wild(a, fresh, wild) for a in lit.args), lit.span, lit.negated))
        else:
            body.append(lit)
    local = sorted(inner_vars(agg) - outside)
    tuple_terms = [_var(v) for v in local] + [_var(w[2:]) for w in wild]
    cond = ", ".join(_literal(lit) for lit in body)
    if agg.kind == "count":
        elems = ",".join(tuple_terms) or "0"
    else:
        elems = ",".join([_term(agg.target)] + tuple_terms)  # type: ignore[arg-type]
    out = [f"{result} = #{agg.kind}{{ {elems} : {cond} }}"]
    if agg.kind == "min":
        out.append(f"{result} != #sup")  # Soufflé: an empty min does not fire the rule
    if agg.kind == "max":
        out.append(f"{result} != #inf")
    return out


def _replace_aggregates(t: Term, found: list[tuple[Aggregate, str]], fresh: _Fresh) -> Term:
    def replace(x: Term) -> Term | None:
        if isinstance(x, Aggregate):
            name = fresh("agg")
            found.append((x, _var(name[2:])))
            return Var(name[2:])
        return None

    return rewrite_term(t, replace)


def _outer_vars(rule: Rule) -> set[str]:
    from .lint import _var_names

    out: set[str] = set()
    for lit in rule.heads + rule.body:
        for t in literal_terms(lit):
            _var_names(t, out)
    return out


def _body(rule: Rule, fresh: _Fresh) -> list[str]:
    outside = _outer_vars(rule)
    parts: list[str] = []
    for lit in rule.body:
        if isinstance(lit, Constraint) and lit.op == "=" and isinstance(lit.right, Aggregate) and isinstance(
                lit.left, Var):
            parts += _aggregate(lit.right, _var(lit.left.name), outside, fresh)
            continue
        if isinstance(lit, Constraint) and any(aggregates_in(x) for x in (lit.left, lit.right)):
            found: list[tuple[Aggregate, str]] = []
            left = _replace_aggregates(lit.left, found, fresh)
            right = _replace_aggregates(lit.right, found, fresh)
            for agg, name in found:
                parts += _aggregate(agg, name, outside, fresh)
            parts.append(_literal(Constraint(lit.op, left, right, lit.span)))
            continue
        parts.append(_literal(lit))
    return parts


def _eqrel(name: str) -> list[str]:
    p = pred(name)
    return [f"{p}(X,X) :- {p}(X,_).", f"{p}(X,X) :- {p}(_,X).", f"{p}(Y,X) :- {p}(X,Y).",
            f"{p}(X,Z) :- {p}(X,Y), {p}(Y,Z)."]


def translate(prog: Program) -> str:
    """gringo text for the rules."""
    lines: list[str] = []
    fresh = _Fresh()
    for decl in sorted(prog.decls.values(), key=lambda d: d.name):
        lines.append(f"#defined {pred(decl.name)}/{decl.arity}.")
        if decl.eqrel:
            lines += _eqrel(decl.name)
    for index, rule in enumerate(prog.rules):
        _RULE_INDEX[0] = index
        body = ", ".join(_body(rule, fresh))
        for head in rule.heads:
            lines.append(f"{_atom(head)} :- {body}." if body else f"{_atom(head)}.")
    for name in sorted(prog.outputs):
        lines.append(f"#show {pred(name)}/{prog.decls[name].arity}.")
    return "\n".join(lines) + "\n"


def _fact_value(v) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        if not -(2**31) <= v < 2**31:
            raise RuleError(f"fact value {v} does not fit in 32 bits", None)
        return str(v) if v >= 0 else f"({v})"
    return _string(str(v))


def facts_text(facts: dict[str, list[tuple]], prog: Program | None = None) -> str:
    out = []
    for name, rows in facts.items():
        p = pred(name)
        types = [t for _, t in prog.decls[name].attrs] if prog is not None and name in prog.decls else []
        structured = [prog is not None and (t in prog.records or t in prog.adts) for t in types]
        for row in rows:
            cells = [_StructuredParser(str(v), t, prog).term() if structured[i] else _fact_value(v)  # type: ignore
                     for i, (v, t) in enumerate(zip(row, types or [None] * len(row)))] if structured else \
                [_fact_value(v) for v in row]
            out.append(f"{p}({','.join(cells)}).")
    return "\n".join(out) + "\n"


class _StructuredParser:
    """A record/ADT value in Soufflé's text form (`[1, a]`, `nil`, `$Add($Num(1), $Zero)`) -> gringo."""

    def __init__(self, text: str, typ: str, prog: Program):
        self.text, self.pos, self.typ, self.prog = text, 0, typ, prog

    def term(self) -> str:
        out = self._value(self.typ)
        if self.text[self.pos:].strip():
            raise RuleError(f"cannot read {self.text!r} as a {self.typ}", None)
        return out

    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def _expect(self, ch: str) -> None:
        self._skip()
        if not self.text.startswith(ch, self.pos):
            raise RuleError(f"cannot read {self.text!r} as a {self.typ}: expected {ch!r} at {self.pos}", None)
        self.pos += len(ch)

    def _fields(self, fields) -> list[str]:
        out = []
        for i, (_f, ftype) in enumerate(fields):
            if i:
                self._expect(",")
            out.append(self._value(ftype))
        return out

    def _value(self, typ: str) -> str:
        self._skip()
        prog = self.prog
        if typ in prog.records:
            if self.text.startswith("nil", self.pos):
                self.pos += 3
                return "nil"
            self._expect("[")
            inner = self._fields(prog.records[typ])
            self._expect("]")
            return f"({inner[0]},)" if len(inner) == 1 else "(" + ",".join(inner) + ")"
        if typ in prog.adts:
            self._expect("$")
            start = self.pos
            while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
                self.pos += 1
            branch = self.text[start:self.pos]
            if branch not in prog.adts[typ]:
                raise RuleError(f"cannot read {self.text!r}: ${branch} is not a branch of {typ}", None)
            fields = prog.adts[typ][branch]
            self._skip()
            if self.text.startswith("(", self.pos):
                self.pos += 1
                inner = self._fields(fields) if fields else []
                self._expect(")")
            elif fields:
                raise RuleError(f"cannot read {self.text!r}: ${branch} needs {len(fields)} fields", None)
            else:
                inner = []
            return f"c_{branch}(" + ",".join(inner) + ")" if inner else f"c_{branch}"
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in "[(":
                depth += 1
            elif ch in "])" and depth == 0 or ch == "," and depth == 0:
                break
            elif ch in "])":
                depth -= 1
            self.pos += 1
        raw = self.text[start:self.pos].strip()
        if prog.primitive(typ) == "number":
            return _fact_value(int(raw))
        return _string(raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw)


def _decode(sym: clingo.Symbol):
    if sym.type == clingo.SymbolType.Number:
        return sym.number
    if sym.type == clingo.SymbolType.String:
        return sym.string
    return _souffle_text(sym)


def _souffle_text(sym: clingo.Symbol) -> str:
    """Records and ADTs printed as Soufflé prints them: `[1, a]`, `nil`, `$Add($Num(1), $Zero)`."""
    if sym.type == clingo.SymbolType.Number:
        return str(sym.number)
    if sym.type == clingo.SymbolType.String:
        return sym.string
    if sym.name == "":
        return "[" + ", ".join(_souffle_text(a) for a in sym.arguments) + "]"
    if sym.name == "nil" and not sym.arguments:
        return "nil"
    branch = sym.name[2:]
    if not sym.arguments:
        return f"${branch}"
    return f"${branch}(" + ", ".join(_souffle_text(a) for a in sym.arguments) + ")"


_TRANSLATIONS: dict[int, tuple[Program, str]] = {}  # id -> (the program, kept alive so the id stays its own; text)


def _translated(prog: Program) -> str:
    """`translate` once per rule program (each `ave check` makes an engine: 2.7 ms of a GEMM's
    140 ms). Programs are not mutated after loading; the last few are kept."""
    hit = _TRANSLATIONS.get(id(prog))
    if hit is None or hit[0] is not prog:
        if len(_TRANSLATIONS) >= 8:
            _TRANSLATIONS.pop(next(iter(_TRANSLATIONS)))
        hit = _TRANSLATIONS[id(prog)] = (prog, translate(prog))
    return hit[1]


class ClingoEngine:
    """Runs a linted Program on facts in-process; returns every output relation as sorted rows."""

    name = "embedded"

    def __init__(self, prog: Program):
        self.prog = prog
        self.rules_text = _translated(prog)
        self._reverse = {pred(n): n for n in prog.decls}

    def run(self, facts: dict[str, list[tuple]], timeout: float | None = None) -> dict[str, list[tuple]]:
        if timeout is not None:
            return run_in_worker(self, facts, timeout)
        messages: list[str] = []
        ctl = clingo.Control(["--warn=none", "--models=0"], logger=lambda code, msg: messages.append(msg),
                             message_limit=20)
        functors = _Functors(self.prog.rules)
        try:
            ctl.add("base", [], facts_text(facts, self.prog))
            ctl.add("base", [], self.rules_text)
            ctl.ground([("base", [])], context=functors)
        except Exception as exc:
            if functors.failure is not None:
                # a functor failed at run time (Soufflé aborts the run too). clingo re-raises a
                # callback's exception as type(exc)(exc), which need not give it back intact:
                # the original is the one the functors kept
                raise functors.failure from None
            if isinstance(exc, RuleError):
                raise
            if isinstance(exc, RuntimeError):
                raise RuleError(self._map_error(messages, exc), None) from None
            raise
        models: list[list[clingo.Symbol]] = []
        with ctl.solve(yield_=True) as handle:
            for model in handle:
                models.append(model.symbols(shown=True))
        if len(models) != 1:
            raise RuleError(f"the rules gave {len(models)} models; a stratified program has exactly one", None)
        out: dict[str, list[tuple]] = {name: [] for name in self.prog.outputs}
        for sym in models[0]:
            name = self._reverse.get(sym.name)
            if name in out:
                out[name].append(tuple(_decode(a) for a in sym.arguments))
        for rows in out.values():
            rows.sort()
        return out

    def _map_error(self, messages: list[str], exc: Exception) -> str:
        text = "; ".join(m.strip().splitlines()[0] for m in messages) or str(exc)
        return f"embedded engine failed: {text}"
