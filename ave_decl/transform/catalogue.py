"""Kernel transformations (AST -> AST): a catalogue that preserves semantics, and mutation operators.

Every function takes and returns an `ast.Module`; they are what `ave fuzz --transform` expects, and
each returns the module unchanged where its pattern does not apply. Semantics-preserving (the
CATALOGUE): `xor_swizzle_shared` (one swizzle on every write *and* read of a shared buffer),
`unroll_constant_loops`, `vectorize_copies` (coalesced scalar copies -> vectors of up to 8
contiguous values per thread), and from `gemm_rewrites`: `pipeline_k_loop` and
`pipeline_k_loop_3_stages` (async-copy pipelines with 2 and 3 stages), `split_k_tile` (retile:
half the K tile), `mfma_32x32x8_to_16x16x16` (switch to an equivalent instruction shape). Mutations (they should be caught): `xor_swizzle_writes_only`,
`transpose_shared_reads`, `pipeline_k_loop_wrong_stage`.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..lang import ast as A
from .ast_rewrite import (
    Rewrite,
    const_range,
    mentions,
    per_thread_names,
    rewrite,
    shared_buffers,
    shared_decls,
    thread_count,
    thread_vars,
    walk,
)
from .gemm_rewrites import (
    mfma_32x32x8_to_16x16x16,
    pipeline_k_loop,
    pipeline_k_loop_3_stages,
    pipeline_k_loop_wrong_stage,
    split_k_tile,
)


def _swizzle_index(sub: A.Subscript, cols: int) -> A.Subscript:
    r, c = sub.indices
    return A.Subscript(sub.value, (r, A.BinOp("^", c, A.BinOp("%", r, A.Int(cols)))))


def _swizzle(module: A.Module, stores: bool, loads: bool) -> A.Module:
    # an ldmatrix row address names 8 contiguous elements: an element-wise swizzle of its start
    # column would not move the other seven, so buffers read that way are left alone
    matrix_reads = {n.args[0].value.id for n in walk(module) if isinstance(n, A.Call)
                    and n.func_name.startswith("ldmatrix") and n.args and isinstance(n.args[0], A.Subscript)
                    and isinstance(n.args[0].value, A.Name)}
    buffers = {k: v for k, v in shared_buffers(module).items() if k not in matrix_reads}

    def is_buf(x) -> bool:
        return isinstance(x, A.Subscript) and isinstance(x.value, A.Name) and x.value.id in buffers

    def fn(n):
        if isinstance(n, A.Assign) and is_buf(n.target):
            target = _swizzle_index(n.target, buffers[n.target.value.id][1]) if stores else n.target
            return A.Assign(target, rewrite(n.value, fn))
        if loads and is_buf(n):
            return _swizzle_index(n, buffers[n.value.id][1])
        return None

    return rewrite(module, fn)


def xor_swizzle_shared(module: A.Module) -> A.Module:
    """`buf[r, c]` -> `buf[r, c ^ (r % cols)]` on every store and load: a bank-conflict swizzle that
    keeps the data where each reader expects it."""
    return _swizzle(module, stores=True, loads=True)


def xor_swizzle_writes_only(module: A.Module) -> A.Module:
    """The same swizzle applied on the stores but not on the loads (a classic bug)."""
    return _swizzle(module, stores=True, loads=False)


def unroll_constant_loops(module: A.Module, max_trip: int = 4) -> A.Module:
    """Replace `for v in range(c)` (c <= max_trip, no nested loop) by c copies of its body."""

    def fn(n):
        if isinstance(n, tuple) and any(_unrollable(s, max_trip) for s in n):
            out: list = []
            for s in n:
                if _unrollable(s, max_trip):
                    for i in range(s.iter.args[0].value):  # type: ignore[union-attr]
                        out.extend(rewrite(s.body, _subst(s.var, i)))
                else:
                    out.append(rewrite(s, fn))
            return tuple(out)
        return None

    return rewrite(module, fn)


def _unrollable(s, max_trip: int) -> bool:
    return (isinstance(s, A.For) and isinstance(s.iter, A.Call) and s.iter.func_name == "range"
            and len(s.iter.args) == 1 and isinstance(s.iter.args[0], A.Int) and s.iter.args[0].value <= max_trip
            and not any(isinstance(b, (A.For, A.If)) for b in s.body)
            and not any(isinstance(b, A.Assign) and isinstance(b.target, A.Name) for b in s.body))


def _subst(var: str, value: int) -> Rewrite:
    return lambda n: A.Int(value) if isinstance(n, A.Name) and n.id == var else None


def transpose_shared_reads(module: A.Module) -> A.Module:
    """Mutation: read `buf[c, r]` instead of `buf[r, c]` from square shared buffers."""
    square = {n for n, (r, c) in shared_buffers(module).items() if r == c}

    def fn(n):
        if isinstance(n, A.Assign) and isinstance(n.target, A.Subscript):
            return A.Assign(n.target, rewrite(n.value, fn))
        if isinstance(n, A.Subscript) and isinstance(n.value, A.Name) and n.value.id in square:
            return A.Subscript(n.value, n.indices[::-1])
        return None

    return rewrite(module, fn)


VECTOR_WIDTHS = (8, 4, 2)  # values per vector access: 16 bytes of bf16 down to 2


def vectorize_copies(module: A.Module, max_width: int = 8) -> A.Module:
    """Coalesced scalar copy loops -> vector copies: in a loop
    `for e in range(E): i = e * T + t; S[i // R, i % R] = G[...]` (T the block size, t the thread
    id) each thread takes V contiguous elements per step instead of one,
    `i = (e // V * T + t) * V + e % V`, with V the widest of 8, 4, 2 (<= max_width) that divides
    E and every row length R (so a vector never straddles a row). The same elements are copied,
    each exactly once, to the same places; only which thread moves which element changes. Applies
    only where the loop body is such a copy: stores into shared or global tensors that mention
    neither the loop variable nor anything per-thread (ids, registers, values computed from them)
    except through `i`."""
    return dataclasses.replace(module, kernels=tuple(_vectorize_kernel(k, max_width) for k in module.kernels))


def _vectorize_kernel(kernel: A.Kernel, max_width: int) -> A.Kernel:
    threads, tvars, per_thread = thread_count(kernel), thread_vars(kernel), per_thread_names(kernel)
    memories = set(shared_decls(kernel.body)) | {p.name for p in kernel.params}
    if threads is None or not tvars:
        return kernel

    def fn(n):
        trip = const_range(n)
        if trip is None or not n.body or not isinstance(n.body[0], A.Assign) or not isinstance(n.body[0].target, A.Name):
            return None
        index, rest = n.body[0], n.body[1:]
        e, i = n.var, index.target.id
        if not _is_coalesced(index.value, e, threads, tvars) or not rest:
            return None
        if not all(isinstance(s, A.Assign) and isinstance(s.target, A.Subscript) and isinstance(s.target.value, A.Name)
                   and s.target.value.id in memories and not mentions(s, e) and not any(mentions(s, t) for t in per_thread)
                   for s in rest):
            return None
        rows = [x.right.value for x in walk(rest) if isinstance(x, A.BinOp) and x.op in ("//", "%") and x.left == A.Name(i)
                and isinstance(x.right, A.Int)]
        width = next((v for v in VECTOR_WIDTHS if v <= max_width and trip % v == 0 and all(r % v == 0 for r in rows)),
                     None)
        if width is None:
            return None
        t = index.value.right  # type: ignore[attr-defined]
        vector = A.BinOp("+", A.BinOp("*", A.BinOp("+", A.BinOp("*", A.BinOp("//", A.Name(e), A.Int(width)),
                                                                   A.Int(threads)), t), A.Int(width)),
                         A.BinOp("%", A.Name(e), A.Int(width)))
        return dataclasses.replace(n, body=(A.Assign(index.target, vector),) + rest)

    return dataclasses.replace(kernel, body=rewrite(kernel.body, fn))


def _is_coalesced(x: A.Expr, e: str, threads: int, tvars: set[str]) -> bool:
    """`e * threads + t` with t a thread-id variable."""
    return (isinstance(x, A.BinOp) and x.op == "+" and isinstance(x.right, A.Name) and x.right.id in tvars
            and x.left == A.BinOp("*", A.Name(e), A.Int(threads)))


CATALOGUE: dict[str, Callable[[A.Module], A.Module]] = {
    "xor_swizzle_shared": xor_swizzle_shared,
    "unroll_constant_loops": unroll_constant_loops,
    "vectorize_copies": vectorize_copies,
    "pipeline_k_loop": pipeline_k_loop,
    "pipeline_k_loop_3_stages": pipeline_k_loop_3_stages,
    "split_k_tile": split_k_tile,
    "mfma_32x32x8_to_16x16x16": mfma_32x32x8_to_16x16x16,
}
MUTATIONS: dict[str, Callable[[A.Module], A.Module]] = {
    "xor_swizzle_writes_only": xor_swizzle_writes_only,
    "transpose_shared_reads": transpose_shared_reads,
    "pipeline_k_loop_wrong_stage": pipeline_k_loop_wrong_stage,
}


