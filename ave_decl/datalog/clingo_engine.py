"""The embedded engine: the portable Soufflé profile translated to gringo and run by clingo.

All clingo calls live in this module (clingo 6 will change the Python API). Traps handled,
from ../shared/reference/datalog-engines.md: mangled predicate/variable names (`_y` is a
constant in gringo), `%` is `\\`, `^` is power (gringo `**`), `bxor` is gringo `^`, shifts and
min/max/string functors are `@`-functions with Soufflé's 32-bit semantics, literals are
range-checked by the loader, exactly one model is asserted.
"""
from __future__ import annotations

import clingo

from ..errors import RuleError
from .program import Atom, BinTerm, Constraint, Functor, Num, Program, Rule, Sym, Term, UnTerm, Var, Wild

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


def pred(name: str) -> str:
    return "r_" + name.replace(".", "__").replace("?", "_q")


def _var(name: str) -> str:
    return "V_" + name.replace("?", "_q")


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _term(t: Term) -> str:
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
    if isinstance(t, Functor):
        return f"@{t.name}({','.join(_term(a) for a in t.args)})"
    raise RuleError(f"term {t!r} is not supported by the embedded engine", None)


def _atom(a: Atom) -> str:
    inner = f"{pred(a.name)}({','.join(_term(x) for x in a.args)})" if a.args else pred(a.name)
    return f"not {inner}" if a.negated else inner


def _literal(lit) -> str:
    if isinstance(lit, Atom):
        return _atom(lit)
    assert isinstance(lit, Constraint)
    return f"{_term(lit.left)}{lit.op}{_term(lit.right)}"


def translate(prog: Program) -> tuple[str, list[tuple[int, Rule]]]:
    """gringo text for the rules, and which output line came from which rule (for error mapping)."""
    lines: list[str] = []
    origin: list[tuple[int, Rule]] = []
    for decl in sorted(prog.decls.values(), key=lambda d: d.name):
        lines.append(f"#defined {pred(decl.name)}/{decl.arity}.")
    for rule in prog.rules:
        body = ", ".join(_literal(lit) for lit in rule.body)
        for head in rule.heads:
            origin.append((len(lines) + 1, rule))
            lines.append(f"{_atom(head)} :- {body}." if body else f"{_atom(head)}.")
    for name in sorted(prog.outputs):
        lines.append(f"#show {pred(name)}/{prog.decls[name].arity}.")
    return "\n".join(lines) + "\n", origin


def _fact_value(v) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        if not -(2**31) <= v < 2**31:
            raise RuleError(f"fact value {v} does not fit in 32 bits", None)
        return str(v) if v >= 0 else f"({v})"
    return _string(str(v))


def facts_text(facts: dict[str, list[tuple]]) -> str:
    out = []
    for name, rows in facts.items():
        p = pred(name)
        for row in rows:
            out.append(f"{p}({','.join(_fact_value(v) for v in row)}).")
    return "\n".join(out) + "\n"


def _decode(sym: clingo.Symbol):
    if sym.type == clingo.SymbolType.Number:
        return sym.number
    if sym.type == clingo.SymbolType.String:
        return sym.string
    return str(sym)


class ClingoEngine:
    """Runs a linted Program on facts in-process; returns every output relation as sorted rows."""

    name = "embedded"

    def __init__(self, prog: Program):
        self.prog = prog
        self.rules_text, self.origin = translate(prog)
        self._reverse = {pred(n): n for n in prog.decls}

    def run(self, facts: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
        messages: list[str] = []
        ctl = clingo.Control(["--warn=none", "--models=0"], logger=lambda code, msg: messages.append(msg),
                             message_limit=20)
        try:
            ctl.add("base", [], facts_text(facts))
            ctl.add("base", [], self.rules_text)
            ctl.ground([("base", [])], context=_Functors())
        except RuntimeError as exc:
            raise RuleError(self._map_error(messages, exc), None) from None
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
