"""Issue 16: an expression's term instantiated from its per-kernel template is the very term the
node-by-node build makes (same hash-consed Z3 AST), for every expression of the examples and for
plain and compound symbol values; the fallbacks keep the builder's behaviour."""
from __future__ import annotations

import pytest
import z3
from conftest import EXAMPLES

from ave_decl.facts.lower import lower_module
from ave_decl.facts.view import KernelView
from ave_decl.lang.parser import parse_source
from ave_decl.lang.source import SourceFile
from ave_decl.solver.smt import Encoder

KERNELS = ["gemm_lds_mfma.ave", "gemm_lds_swizzled.ave", "gemm_pipelined.ave", "gemm_mma_ldmatrix.ave",
           "flash_attention_gqa.ave", "fused_moe.ave"]


def _encoder(name: str) -> Encoder:
    src = SourceFile.read(EXAMPLES / name)
    (kf,) = lower_module(parse_source(src), src)
    return Encoder(KernelView.of(kf))


def _built(enc: Encoder, eid: int, env: dict) -> object:
    """The node-by-node term's id, or the exception's type when the build refuses."""
    try:
        return enc._term(eid, env, {}).get_id()
    except Exception as e:  # noqa: BLE001 - compared, not swallowed
        return type(e)


def _via_term(enc: Encoder, eid: int, env: dict) -> object:
    try:
        return enc.term(eid, env).get_id()
    except Exception as e:  # noqa: BLE001
        return type(e)


@pytest.mark.parametrize("name", KERNELS)
def test_templated_terms_equal_the_node_by_node_build(name):
    enc = _encoder(name)
    templates = enc._templates
    compared = 0
    for eid, node in enumerate(enc.nodes):
        names = templates.symbols(eid)
        if names is None or node.op in ("sym", "const"):
            continue
        plain = {n: z3.Int(f"{n}_a", enc.ctx) for n in names}
        compound = {n: z3.Int(f"{n}_b", enc.ctx) * 4 - 32 for n in names}
        for env in (plain, compound, plain):  # 1st use builds, later ones substitute
            assert _via_term(enc, eid, env) == _built(enc, eid, env), (name, eid, node.op)
        compared += 1
    assert compared > 20  # the examples have many compound expressions: the test compared them
    assert templates._made, "no expression was templated: the comparison tested nothing"


def test_expressions_with_bitwise_operators_are_never_templated():
    enc = _encoder("gemm_lds_swizzled.ave")
    bitwise = [eid for eid, n in enumerate(enc.nodes) if n.op in ("xor", "and", "or")]
    assert bitwise, "the swizzled GEMM indexes shared memory through an xor"
    for eid in bitwise:
        assert enc._templates.symbols(eid) is None
        env = {n: z3.Int(n, enc.ctx) for n in _symbol_names(enc, eid)}
        for _ in range(3):
            assert enc._templates.instantiate(eid, env, enc._built) is None
        assert eid not in enc._templates._made


def test_missing_symbol_still_raises_and_bool_values_fall_back():
    enc = _encoder("gemm_lds_mfma.ave")
    eid = next(e for e, n in enumerate(enc.nodes)
               if n.op not in ("sym", "const") and enc._templates.symbols(e))
    names = enc._templates.symbols(eid)
    env = {n: z3.Int(n, enc.ctx) for n in names}
    enc.term(eid, env)
    enc.term(eid, env)
    assert eid in enc._templates._made
    with pytest.raises(KeyError):
        enc.term(eid, {})
    as_bool = dict(env, **{names[0]: z3.Bool("b", enc.ctx)})
    assert enc._templates.instantiate(eid, as_bool, enc._built) is None


def _symbol_names(enc: Encoder, eid: int) -> set[str]:
    out, stack = set(), [eid]
    while stack:
        n = enc.nodes[stack.pop()]
        if n.op == "sym" and not n.name.startswith("size:"):
            out.add(n.name)
        elif n.op not in ("sym", "const"):
            stack.extend(n.args)
    return out
