"""An expression's Z3 term built once per kernel with placeholder symbols, then instantiated by
substitution.

Why: every dynamic instance (a kill instantiation, a chain's writer, an operand's lane) builds
the terms of the same few index expressions again with its own variables: a thousand kill
instantiations of one pipelined GEMM made 16,000 terms node by node, each node a z3py wrapper
and two reference-count calls. Here an expression used a second time gets a template (its term
over one fresh constant per symbol), and each later use is one `Z3_substitute` of the
instance's values for those constants.

The result is the very term the node-by-node build makes: Z3 hash-conses terms, substitution
rebuilds the same applications over the same arguments without simplifying, and the builder
(`Encoder._term`) makes the same application whatever a symbol's value is, as long as the value
is an Int term (it never folds or inspects values) — except for `^ & |`, whose encoding depends
on the intervals of the operands (bit decompositions, smt.Encoder._bitwise): expressions
containing them are never templated. tests/test_term_templates.py compares both builds on
every expression of the examples.
"""
from __future__ import annotations

from collections.abc import Callable

import z3

from .raw_terms import _get_sort, _sort_kind, _unchecked, application_class, reference_of

Build = Callable[[int, dict[str, z3.ExprRef]], z3.ExprRef]  # the node-by-node builder
_VALUE_DEPENDENT = frozenset({"xor", "and", "or"})  # encoded by the operands' intervals
_LEAVES = frozenset({"sym", "const"})
_substitute = _unchecked(z3.Z3_substitute)  # reference_of() raises Z3's error on a null result


class TermTemplates:
    """Templates of one kernel's expressions (one Encoder, one Z3 context)."""

    def __init__(self, nodes: list, ctx: z3.Context):
        self.nodes = nodes
        self.ctx = ctx
        self._symbols: dict[int, tuple[str, ...] | None] = {}  # None: not templatable
        self._used_once: set[int] = set()
        # eid -> (template term, placeholder array, placeholders kept alive, symbol names, the
        # class of its instances)
        self._made: dict[int, tuple[z3.ExprRef, object, list[z3.ArithRef], tuple[str, ...], type | None]] = {}
        self._placeholders: dict[str, z3.ArithRef] = {}

    def instantiate(self, eid: int, env: dict[str, z3.ExprRef], build: Build) -> z3.ExprRef | None:
        """The term of `eid` under `env` by substitution; None when the caller builds it node by
        node: a leaf, a first use, an expression with `^ & |`, a symbol `env` lacks (the builder
        then raises its KeyError) or binds to a non-Int term. `build` makes a template node by
        node (the encoder's builder, passed per call: held here, it would make the encoder a
        reference cycle, freed only by the garbage collector, with its Z3 context)."""
        made = self._made.get(eid)
        if made is None:
            if self.nodes[eid].op in _LEAVES:
                return None
            if eid not in self._used_once:  # most expressions are built once per kernel: no template
                self._used_once.add(eid)
                return None
            if self.symbols(eid) is None:
                return None
            made = self._make(eid, build)
        template, placeholders, _alive, names, cls = made
        if not names:
            return template
        c = self.ctx.ref()
        values = []
        for name in names:
            value = env.get(name)
            if value is None:
                return None
            a = value.as_ast()
            if _sort_kind(c, _get_sort(c, a)) != z3.Z3_INT_SORT:
                return None
            values.append(a)
        n = len(names)
        a = _substitute(c, template.as_ast(), n, placeholders, (z3.Ast * n)(*values))
        return reference_of(cls, a, self.ctx)

    def symbols(self, eid: int) -> tuple[str, ...] | None:
        """The instance symbols (not sizes) of an expression, in first-occurrence order; None if it
        contains an operator whose encoding depends on its operands' values."""
        if eid in self._symbols:
            return self._symbols[eid]
        stack, order, seen = [eid], [], set()
        while stack:  # iterative: expressions nest deeply (bounded by the front end, not by us)
            e = stack.pop()
            if e in seen:
                continue
            seen.add(e)
            node = self.nodes[e]
            if node.op in _VALUE_DEPENDENT:
                self._symbols[eid] = None
                return None
            if node.op == "sym":
                if not node.name.startswith("size:"):
                    order.append(node.name)
            elif node.op != "const":
                stack.extend(reversed(node.args))
        found = tuple(dict.fromkeys(order))
        self._symbols[eid] = found
        return found

    def _make(self, eid: int, build: Build) -> tuple[z3.ExprRef, object, list[z3.ArithRef], tuple[str, ...],
                                                     type | None]:
        names = self._symbols[eid] or ()
        alive = [self._placeholder(name) for name in names]
        template = build(eid, dict(zip(names, alive)))
        c = self.ctx.ref()
        # the class z3py's wrapper probes each instance for: the template's sort (Int or Bool;
        # None: probe), never a numeral's (substitution does not simplify an application)
        cls = application_class(c, template.as_ast())
        made = (template, (z3.Ast * len(alive))(*(p.as_ast() for p in alive)), alive, names, cls)
        self._made[eid] = made
        return made

    def _placeholder(self, name: str) -> z3.ArithRef:
        """One constant per symbol name; `§` appears in no variable Ave names, and a placeholder
        never reaches a query (every one is substituted)."""
        hit = self._placeholders.get(name)
        if hit is None:
            hit = self._placeholders[name] = z3.Int(f"\u00a7{name}", self.ctx)
        return hit
