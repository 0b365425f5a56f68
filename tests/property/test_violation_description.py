"""Property: a violation set's description (JSON cubes and printed text) is exactly its point set,
for random sets over random bounded domains (sizes not powers of two, sets needing negated bits)."""
from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from test_violation_set import check_description

from ave_decl.solver.violation_set import Var, describe


@st.composite
def point_sets(draw):
    sizes = draw(st.lists(st.integers(1, 24), min_size=1, max_size=3))
    names = ["thread", "value", "lane"][:len(sizes)]
    domain = list(itertools.product(*[range(n) for n in sizes]))
    points = draw(st.sets(st.sampled_from(domain), min_size=1, max_size=min(len(domain), 200)))
    return dict(zip(names, sizes)), points


@settings(max_examples=150, deadline=None)
@given(point_sets(), st.booleans())
def test_description_is_exactly_the_set(case, complete):
    sizes, points = case
    variables = [Var(name, None, size) for name, size in sizes.items()]  # type: ignore[arg-type]
    check_description(describe(points, variables, complete), sizes, points)


def test_known_set_needing_negated_literals():
    """Threads whose bits 6 and 4 differ (the LDS GEMM without its first barrier): 128 of 256."""
    points = {(t,) for t in range(256) if (t >> 6 & 1) != (t >> 4 & 1)}
    vs = describe(points, [Var("thread", None, 256)], True)  # type: ignore[arg-type]
    check_description(vs, {"thread": 256}, points)
    assert sorted(c["thread"] for c in vs["cubes"]) == ["bits x0x1xxxx (MSB first)", "bits x1x0xxxx (MSB first)"]
