"""In-memory model of a rule program in the portable Soufflé profile."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..lang.source import Span


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Wild:
    pass


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Sym:
    value: str


@dataclass(frozen=True)
class BinTerm:
    op: str  # + - * / % ^ band bor bxor bshl bshr bshru land lor lxor
    left: "Term"
    right: "Term"


@dataclass(frozen=True)
class UnTerm:
    op: str  # - bnot lnot
    operand: "Term"


@dataclass(frozen=True)
class Functor:
    name: str
    args: tuple["Term", ...]


@dataclass(frozen=True)
class Record:
    """`[t1, t2, ...]`, a value of a record type."""

    args: tuple["Term", ...]


@dataclass(frozen=True)
class Nil:
    """`nil`, the empty value of any record type."""


@dataclass(frozen=True)
class AdtTerm:
    """`$Branch(t1, ...)`, a value of an algebraic data type."""

    branch: str
    args: tuple["Term", ...]


@dataclass(frozen=True)
class Aggregate:
    """`count : {body}`, `sum e : {body}`, `min e : atom`, `max e : ...` (one conjunction)."""

    kind: str  # count | sum | min | max
    target: "Term | None"
    body: tuple["Literal", ...]


Term = Union[Var, Wild, Num, Sym, BinTerm, UnTerm, Functor, Aggregate, Record, Nil, AdtTerm]


def rewrite_term(t: "Term", fn) -> "Term":
    """Top-down rewrite: `fn(t)` returns a replacement, or None to rewrite t's sub-terms instead.
    Aggregates are left whole (their bodies are separate scopes)."""
    new = fn(t)
    if new is not None:
        return new
    if isinstance(t, BinTerm):
        return BinTerm(t.op, rewrite_term(t.left, fn), rewrite_term(t.right, fn))
    if isinstance(t, UnTerm):
        return UnTerm(t.op, rewrite_term(t.operand, fn))
    if isinstance(t, Functor):
        return Functor(t.name, tuple(rewrite_term(a, fn) for a in t.args))
    if isinstance(t, Record):
        return Record(tuple(rewrite_term(a, fn) for a in t.args))
    if isinstance(t, AdtTerm):
        return AdtTerm(t.branch, tuple(rewrite_term(a, fn) for a in t.args))
    return t


@dataclass(frozen=True)
class Atom:
    name: str
    args: tuple[Term, ...]
    span: Span = field(compare=False)
    negated: bool = False


@dataclass(frozen=True)
class Constraint:
    op: str  # = != < <= > >=
    left: Term
    right: Term
    span: Span = field(compare=False)


Literal = Union[Atom, Constraint]


@dataclass(frozen=True)
class Rule:
    heads: tuple[Atom, ...]
    body: tuple[Literal, ...]  # one conjunction; disjunctions are expanded by the parser
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Decl:
    name: str
    attrs: tuple[tuple[str, str], ...]  # (attribute, type)
    span: Span = field(compare=False)
    eqrel: bool = False

    @property
    def arity(self) -> int:
        return len(self.attrs)


@dataclass
class RuleFileMeta:
    """The CodeQL-style metadata header of one `.dl` file."""

    path: str
    fields: dict[str, str] = field(default_factory=dict)
    spans: dict[str, Span] = field(default_factory=dict)  # field -> its first header line (for lint messages)

    @property
    def id(self) -> str:
        return self.fields.get("id", "")


@dataclass
class Program:
    decls: dict[str, Decl] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # user type -> parent (a subtype's supertype)
    unions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # union type -> its members
    records: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # record -> fields
    adts: dict[str, dict[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)  # adt -> branches
    branches: dict[str, str] = field(default_factory=dict)  # branch -> its adt
    type_spans: dict[str, Span] = field(default_factory=dict)  # record/adt -> where it is defined
    io_spans: dict[str, Span] = field(default_factory=dict)  # relation -> its first I/O directive
    rules: list[Rule] = field(default_factory=list)
    inputs: set[str] = field(default_factory=set)
    outputs: set[str] = field(default_factory=set)
    files: list[RuleFileMeta] = field(default_factory=list)

    def primitive(self, type_name: str) -> str:
        seen = set()
        while type_name in self.types and type_name not in seen:
            seen.add(type_name)
            type_name = self.types[type_name]
        return type_name

    def leaves(self, type_name: str) -> frozenset[str]:
        """A type as the set of nominal types it is the union of."""
        if type_name in self.unions:
            return frozenset(x for m in self.unions[type_name] for x in self.leaves(m))
        return frozenset([type_name])

    def is_descendant(self, a: str, b: str) -> bool:
        seen = set()
        while a not in seen:
            if a == b:
                return True
            seen.add(a)
            if a not in self.types:
                return False
            a = self.types[a]
        return False

    def is_subtype(self, a: frozenset[str], b: frozenset[str]) -> bool:
        return all(any(self.is_descendant(x, y) for y in b) for x in a)

    def meet(self, a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
        out = set()
        for x in a:
            for y in b:
                if self.is_descendant(x, y):
                    out.add(x)
                elif self.is_descendant(y, x):
                    out.add(y)
        return frozenset(out)
