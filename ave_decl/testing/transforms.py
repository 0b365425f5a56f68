"""Kernel transformations (AST -> AST): a catalogue that preserves semantics, and mutation operators.

Every function takes and returns an `ast.Module`; they are what `ave fuzz --transform` expects.
Semantics-preserving: `xor_swizzle_shared` (one swizzle on every write *and* read of a shared
buffer), `unroll_constant_loops`, `pipeline_k_loop` (2-stage async-copy pipeline). Mutations (they
should be caught): `xor_swizzle_writes_only`, `transpose_shared_reads`, `pipeline_k_loop_wrong_stage`.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable

from .. import ast as A
from .. import printer
from ..parser import parse_text

Rewrite = Callable[[object], object | None]


def rewrite(node, fn: Rewrite):
    """Top-down rewrite of any AST node: `fn` returns a replacement, or None to descend."""
    new = fn(node)
    if new is not None:
        return new
    if isinstance(node, tuple):
        return tuple(rewrite(x, fn) for x in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: rewrite(getattr(node, f.name), fn) for f in dataclasses.fields(node)
                   if f.name not in ("span", "path")}
        return dataclasses.replace(node, **changes)
    return node


def _shared_buffers(module: A.Module) -> dict[str, tuple[int, int]]:
    """2-D shared buffers with a power-of-two column count: name -> (rows, cols)."""
    out = {}

    def find(n):
        if isinstance(n, A.Assign) and isinstance(n.value, A.Call) and n.value.func_name == "shared":
            dims = n.value.args[1]
            if isinstance(dims, A.Tuple) and len(dims.elts) == 2 and all(isinstance(d, A.Int) for d in dims.elts):
                rows, cols = (d.value for d in dims.elts)  # type: ignore[union-attr]
                if cols & (cols - 1) == 0 and isinstance(n.target, A.Name):
                    out[n.target.id] = (rows, cols)
        return None

    rewrite(module, find)
    return out


def _swizzle_index(sub: A.Subscript, cols: int) -> A.Subscript:
    r, c = sub.indices
    return A.Subscript(sub.value, (r, A.BinOp("^", c, A.BinOp("%", r, A.Int(cols)))))


def _swizzle(module: A.Module, stores: bool, loads: bool) -> A.Module:
    buffers = _shared_buffers(module)

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
    square = {n for n, (r, c) in _shared_buffers(module).items() if r == c}

    def fn(n):
        if isinstance(n, A.Assign) and isinstance(n.target, A.Subscript):
            return A.Assign(n.target, rewrite(n.value, fn))
        if isinstance(n, A.Subscript) and isinstance(n.value, A.Name) and n.value.id in square:
            return A.Subscript(n.value, n.indices[::-1])
        return None

    return rewrite(module, fn)


CATALOGUE: dict[str, Callable[[A.Module], A.Module]] = {
    "xor_swizzle_shared": xor_swizzle_shared,
    "unroll_constant_loops": unroll_constant_loops,
}
MUTATIONS: dict[str, Callable[[A.Module], A.Module]] = {
    "xor_swizzle_writes_only": xor_swizzle_writes_only,
    "transpose_shared_reads": transpose_shared_reads,
}


def pipeline_k_loop(module: A.Module, read_stage: str = "st") -> A.Module:
    """Software-pipeline the K loop of a shared-memory GEMM with two stages: every shared tile
    gets a leading stage dimension, the tiles of iteration kt + step are fetched with
    `async_copy` into the other stage while stage `st = (kt // step) % 2` is multiplied, and one
    `async_wait(); syncthreads()` per iteration publishes the next tile (it also separates the
    previous reads of the other stage from its refill). Applies to kernels of the shape that
    `strategies.render` draws (copy loops, barrier, compute loops, barrier); any other module,
    and tiles with a swizzled layout, are returned unchanged. `read_stage` is the stage the
    compute reads (the correct one is `st`)."""
    text = printer.module(module)
    lines = text.split("\n")
    shared = {m.group(1): m for m in (re.match(r"    (\w+) = shared\((\w+), \((\d+), (\d+)\)\)$", ln) for ln in lines)
              if m}
    head = next((i for i, ln in enumerate(lines) if re.match(r"    for kt in range\(0, K, (\d+)\):$", ln)), None)
    if not shared or head is None or any("layout=" in ln for ln in lines if "shared(" in ln):
        return module
    step = re.match(r"    for kt in range\(0, K, (\d+)\):$", lines[head]).group(1)  # type: ignore[union-attr]
    end = next((i for i in range(head + 1, len(lines)) if lines[i] and not lines[i].startswith("        ")), len(lines))
    body = lines[head + 1:end]
    bars = [i for i, ln in enumerate(body) if ln == "        syncthreads()"]
    if len(bars) != 2 or bars[1] != len(body) - 1:
        return module
    copy, compute = body[:bars[0]], body[bars[0] + 1:bars[1]]
    names = "|".join(shared)

    def staged_copy(block: list[str], stage: str, kt: str, rename: bool) -> list[str]:
        out = []
        for ln in block:
            ln = re.sub(r"\bkt\b", kt, ln)
            if rename:
                ln = re.sub(r"\b([ij])\b", r"\g<1>0", ln)
            m = re.match(rf"(\s*)({names})\[(.*)\] = (.*)$", ln)
            out.append(f"{m.group(1)}async_copy({m.group(2)}[{stage}, {m.group(3)}], {m.group(4)})" if m else ln)
        return out

    prologue = [ln[4:] for ln in staged_copy(copy, "0", "0", rename=True)]
    refill = ["    " + ln for ln in staged_copy(copy, "1 - st", f"(kt + {step})", rename=False)]
    reads = [re.sub(rf"\b({names})\[", rf"\g<1>[{read_stage}, ", ln) for ln in compute]
    new_loop = [lines[head], f"        st = (kt // {step}) % 2", "        async_wait()", "        syncthreads()",
                f"        if kt + {step} < K:"] + refill + reads
    decls = [re.sub(r"shared\((\w+), \((\d+), (\d+)\)\)$", r"shared(\1, (2, \2, \3))", ln) if ln in
             {m.group(0) for m in shared.values()} else ln for ln in lines[:head]]
    return parse_text("\n".join(decls + prologue + new_loop + lines[end:]), "pipelined.ave")


def pipeline_k_loop_wrong_stage(module: A.Module) -> A.Module:
    """Deliberately broken pipelining: the compute reads the stage that is being refilled."""
    return pipeline_k_loop(module, read_stage="1 - st")


CATALOGUE["pipeline_k_loop"] = pipeline_k_loop
MUTATIONS["pipeline_k_loop_wrong_stage"] = pipeline_k_loop_wrong_stage
