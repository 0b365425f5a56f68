"""A check leaves no reference cycle behind: its solver, encoder, chains and Z3 terms are freed
by reference counting when it ends.

Why it matters: a cycle through a kernel's solver kept its Z3 context (16 MB) and every term
alive until a full collection of the cyclic collector, which ran a few times per audit chunk
and walked every object of the process each time (docs/performance.md, Session 23).
"""
from __future__ import annotations

import gc

import pytest

from ave_decl import check
from conftest import EXAMPLES

# ctypes makes an array type per length that z3py asks for and keeps it only while it is used;
# a type object is a cycle by itself (its dict and descriptors), so those are not the check's
_CTYPES = ("PyCArrayType", "StgDict", "getset_descriptor")


def _cyclic_garbage_of(run) -> list[str]:
    """The types of the objects that only the cyclic collector would free after `run()`."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        found = sorted({type(o).__qualname__ for o in gc.garbage if not _ctypes_part(o)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    return found


def _ctypes_part(o: object) -> bool:
    """Part of a ctypes array type: the type, its dicts and descriptors, its bases and mro (a
    tuple of types), or an array of that type."""
    if type(o).__qualname__ in _CTYPES or type(type(o)).__qualname__ == "PyCArrayType":
        return True
    return isinstance(o, tuple) and all(isinstance(x, type) for x in o)


@pytest.mark.parametrize("name", ["flash_attention_gqa", "gemm_pipelined", "fused_moe"])
def test_a_check_leaves_no_cycle(name, monkeypatch):
    """Deferred kill constraints (chains -> deferred -> chains), the guarded-coverage helper
    (access queries <-> coverage) and recursive closures were such cycles."""
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    path = EXAMPLES / f"{name}.ave"
    text = path.read_text()
    check(text, path=str(path), violation_sets=False)  # parsers, rules and caches built first
    assert _cyclic_garbage_of(lambda: check(text, path=str(path), violation_sets=False)) == []


def test_the_front_end_keeps_one_kernels_context_for_its_solver():
    """The first kernel's solver goes on in its derived facts' Z3 context; every other kernel's
    is freed when its facts are derived (contexts alive together each fault in fresh pages)."""
    import z3

    from ave_decl.lang.source import SourceFile
    from ave_decl.pipeline import KEPT_CONTEXTS, front_end

    names = ["gemm_naive", "gemm_lds_mfma", "untagged_operand"]
    fe = front_end([SourceFile(str(EXAMPLES / f"{n}.ave"), (EXAMPLES / f"{n}.ave").read_text()) for n in names])
    assert len(fe.kernels) == 3 and KEPT_CONTEXTS == 1
    assert list(fe.contexts) == [fe.kernels[0].kid] and isinstance(fe.contexts[fe.kernels[0].kid], z3.Context)
