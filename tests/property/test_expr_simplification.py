"""The ExprTable's folding and div/mod identities never change a value (Python semantics)."""
from __future__ import annotations

from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ave_decl.hw.expr import ExprTable, Node, evaluate

OPS = ["add", "sub", "mul", "floordiv", "mod", "recombine", "mod_of_sum", "mod_of_mod", "div_of_div"]


@st.composite
def programs(draw):
    """A random expression as a list of (op, operand refs / constants), built twice:
    once through `op` (with simplification) and once as raw nodes (no simplification)."""
    steps = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50),
                                    st.sampled_from([1, 2, 4, 8, 16, 32, 64, 3, 6, -4])), min_size=1, max_size=12))
    return steps


def build(steps, simplify: bool):
    t = ExprTable()
    vals = [t.sym("x"), t.sym("y"), t.const(7)]
    mk = t.op if simplify else (lambda op, *xs: t.intern(Node(op, tuple(xs))))
    for op, i, j, c in steps:
        a = vals[i % len(vals)]
        b = vals[j % len(vals)] if op in ("add", "sub", "mul") and j % 3 == 0 else t.const(c)
        k = t.const(c)
        if op == "recombine":  # (a // c) * c + a % c, both operand orders
            parts = (mk("mul", mk("floordiv", a, k), k), mk("mod", a, k))
            vals.append(mk("add", *(parts if j % 2 else parts[::-1])))
        elif op == "mod_of_sum":  # (y * (c * m) + a) % c
            y = vals[j % len(vals)]
            vals.append(mk("mod", mk("add", mk("mul", y, t.const(c * (j % 4 + 1))), a), k))
        elif op == "mod_of_mod":
            vals.append(mk("mod", mk("mod", a, t.const(c * (j % 3 + 1))), k))
        elif op == "div_of_div":
            vals.append(mk("floordiv", mk("floordiv", a, t.const(abs(c) * (j % 3 + 1))), t.const(abs(c))))
        else:
            vals.append(mk(op, a, b))
    return t, vals[-1]


@settings(max_examples=examples(300), deadline=None)
@given(programs(), st.integers(-300, 300), st.integers(-300, 300))
def test_simplified_equals_raw(steps, x, y):
    t1, e1 = build(steps, True)
    t2, e2 = build(steps, False)
    env = {"x": x, "y": y}
    assert evaluate(t1, e1, env) == evaluate(t2, e2, env)
