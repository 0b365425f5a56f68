"""Catalogue transformations specific to shared-memory GEMM K loops: pipelining, retiling, and
switching to an equivalent matrix-instruction shape.

They recognise the kernel shape that `strategies.render` draws (and that hand-written kernels of
the same structure have): a K loop `for kt in range(0, K, KT)` whose body is copy loops into
shared tiles, a barrier, one compute loop, a barrier; and an epilogue that stores the
accumulators. Anything else is returned unchanged, so composing them with other
transformations is safe.
"""
from __future__ import annotations

import dataclasses
import re

from ..lang import ast as A
from ..lang import printer
from ..lang.parser import parse_text
from .ast_rewrite import const_range, is_call_stmt, mentions, rewrite, shared_decls, with_range
from .gemm_templates import (
    MFMA16_ACCUMULATORS,
    mfma16_compute,
    mfma16_epilogue,
    mfma32_compute,
    mfma32_epilogue,
    valid_swizzles,
)


def _k_loop(module: A.Module):
    """The printed module's lines, its 2-D shared tiles (name -> declaration match), the K loop's
    line, step and end, its copy lines and its compute lines: for the shape `strategies.render`
    draws (copy loops, barrier, compute, barrier at the end of the K loop), without a swizzled
    layout; None otherwise."""
    lines = printer.module(module).split("\n")
    shared = {m.group(1): m for m in (re.match(r"    (\w+) = shared\((\w+), \((\d+), (\d+)\)\)$", ln) for ln in lines)
              if m}
    head = next((i for i, ln in enumerate(lines) if re.match(r"    for kt in range\(0, K, (\d+)\):$", ln)), None)
    if not shared or head is None or any("layout=" in ln for ln in lines if "shared(" in ln):
        return None
    step = int(re.match(r"    for kt in range\(0, K, (\d+)\):$", lines[head]).group(1))  # type: ignore[union-attr]
    end = next((i for i in range(head + 1, len(lines)) if lines[i] and not lines[i].startswith("        ")), len(lines))
    body = lines[head + 1:end]
    bars = [i for i, ln in enumerate(body) if ln == "        syncthreads()"]
    if len(bars) != 2 or bars[1] != len(body) - 1:
        return None
    return lines, shared, head, step, end, body[:bars[0]], body[bars[0] + 1:bars[1]]


def _staged_decls(lines: list[str], shared: dict, stages: int) -> list[str]:
    """The declarations with a leading stage dimension on every shared tile."""
    decls = {m.group(0) for m in shared.values()}
    return [re.sub(r"shared\((\w+), \((\d+), (\d+)\)\)$", rf"shared(\1, ({stages}, \2, \3))", ln) if ln in decls
            else ln for ln in lines]


def pipeline_k_loop(module: A.Module, read_stage: str = "st", stages: int = 2) -> A.Module:
    """Software-pipeline the K loop of a shared-memory GEMM with S = `stages` stages: every shared
    tile gets a leading stage dimension, the prologue fetches tiles 0 .. S-2, and iteration kt
    fetches tile kt + (S-1)*step with `async_copy` into the stage read one iteration earlier while
    stage `st = (kt // step) % S` is multiplied. One `async_wait(); syncthreads()` per iteration
    publishes the landed tiles and separates the previous iteration's reads from the refill.
    Applies to kernels of the shape that `strategies.render` draws (copy loops, barrier, compute
    loop, barrier); any other module, and tiles with a swizzled layout, are returned unchanged.
    `read_stage` is the stage the compute reads (the correct one is `st`)."""
    shape = _k_loop(module)
    if shape is None:
        return module
    lines, shared, head, step, end, copy, compute = shape
    names = "|".join(shared)

    def staged_copy(block: list[str], stage: str, kt: str, rename: str = "") -> list[str]:
        """The copy loops writing `stage` for tile `kt`; outside the loop the index variables get
        the suffix `rename` (an index variable is assigned once per scope)."""
        out = []
        for ln in block:
            ln = re.sub(r"\bkt\b", kt, ln)
            if rename:
                ln = re.sub(r"\b([ij])\b", rf"\g<1>{rename}", ln)
            m = re.match(rf"(\s*)({names})\[(.*)\] = (.*)$", ln)
            out.append(f"{m.group(1)}async_copy({m.group(2)}[{stage}, {m.group(3)}], {m.group(4)})" if m else ln)
        return out

    ahead = (stages - 1) * step
    prologue: list[str] = []
    for p in range(stages - 1):
        block = [ln[4:] for ln in staged_copy(copy, str(p), str(p * step), rename=str(p))]
        prologue += block if p == 0 else [f"    if {p * step} < K:"] + ["    " + ln for ln in block]
    refill_stage = "1 - st" if stages == 2 else f"(st + {stages - 1}) % {stages}"
    refill = ["    " + ln for ln in staged_copy(copy, refill_stage, f"(kt + {ahead})")]
    reads = [re.sub(rf"\b({names})\[", rf"\g<1>[{read_stage}, ", ln) for ln in compute]
    new_loop = [lines[head], f"        st = (kt // {step}) % {stages}", "        async_wait()", "        syncthreads()",
                f"        if kt + {ahead} < K:"] + refill + reads
    return parse_text("\n".join(_staged_decls(lines[:head], shared, stages) + prologue + new_loop + lines[end:]),
                      "pipelined.ave")


def register_prefetch_k_loop(module: A.Module) -> A.Module:
    """Register prefetch of a shared-memory GEMM's K loop: the shared tiles get two stages; the
    prologue stores tile 0 into stage 0; iteration kt loads tile kt + KT (wrapping to tile 0 on
    the last iteration, so the body has no branch) into register arrays before multiplying stage
    `st = (kt // KT) % 2`, and stores them into the other stage after. One barrier at the top of
    each iteration publishes the stores of the previous one and separates its reads from the next
    refill. Applies to the shape `strategies.render` draws with one element per copy step (not
    vector copies) and no swizzled layout; any other module is returned unchanged."""
    shape = _k_loop(module)
    if shape is None or len(shape[1]) != 2:
        return module
    lines, shared, head, step, end, copy, compute = shape
    text = "\n".join(lines)
    loops = [i for i, ln in enumerate(copy) if re.match(r"        for \w+ in range\(\d+\):$", ln)]
    if len(loops) != 2 or len(copy) != 6 or any("load_vec" in ln or "store_vec" in ln for ln in copy):
        return module
    names = "|".join(shared)
    src = re.search(r"def \w+\(A: Tensor\[(\w+),", text)
    if src is None:
        return module
    regs, prologue, loads, stores = [], [], [], []
    for at in loops:
        loop, index, store = copy[at], copy[at + 1], copy[at + 2]
        m = re.match(rf"(\s*)({names})\[(.*)\] = (.*)$", store)
        trip = re.match(r"        for (\w+) in range\((\d+)\):$", loop)
        if m is None or trip is None:
            return module
        var, count, buf, reg = trip.group(1), trip.group(2), m.group(2), f"r{m.group(2).lower()}"
        ivar = index.strip().split(" = ")[0]

        def renamed(x: str, suffix: str, ivar: str = ivar) -> str:
            return re.sub(rf"\b{ivar}\b", ivar + suffix, x)

        first_tile = re.sub(r"\bkt\b", "0", m.group(4))
        next_tile = re.sub(r"\bkt\b", "kn", m.group(4))
        regs.append(f"    {reg} = local({src.group(1)}, ({count},))")
        prologue += [loop[4:], renamed(index[4:], "0"),
                     f"        {buf}[0, {renamed(m.group(3), '0')}] = {renamed(first_tile, '0')}"]
        loads += [loop, index, f"            {reg}[{var}] = {next_tile}"]
        stores += [loop, renamed(index, "1"), f"            {buf}[1 - st, {renamed(m.group(3), '1')}] = {reg}[{var}]"]
    reads = [re.sub(rf"\b({names})\[", r"\g<1>[st, ", ln) for ln in compute]
    new_loop = [lines[head], f"        st = (kt // {step}) % 2", f"        kn = (kt + {step}) % K", "        syncthreads()",
                *loads, *reads, *stores]
    return parse_text("\n".join(_staged_decls(lines[:head], shared, 2) + regs + prologue + new_loop + lines[end:]),
                      "prefetched.ave")


def pipeline_k_loop_3_stages(module: A.Module) -> A.Module:
    """Three stages: two tiles in flight ahead of the one being multiplied."""
    return pipeline_k_loop(module, stages=3)


def pipeline_k_loop_wrong_stage(module: A.Module) -> A.Module:
    """Deliberately broken pipelining: the compute reads the stage that is being refilled."""
    return pipeline_k_loop(module, read_stage="1 - st")



def split_k_tile(module: A.Module) -> A.Module:
    """Retile: halve the K tile. The shared tiles get KT/2 along K, every copy loop moves half as
    many elements per thread (same mapping), the compute loop runs half as many K steps and the K
    loop steps by KT/2. Each output element receives the same matrix instructions in the same K
    order, so results are bit-identical. Unchanged where a half tile does not divide among the
    copy loop, its vector width, the compute steps, or the shared layout's swizzle."""
    return dataclasses.replace(module, kernels=tuple(_split_k(k) or k for k in module.kernels))


def _split_k(kernel: A.Kernel) -> A.Kernel | None:
    decls = shared_decls(kernel.body)
    at = next((i for i, s in enumerate(kernel.body) if isinstance(s, A.For) and isinstance(s.iter, A.Call)
               and s.iter.func_name == "range" and len(s.iter.args) == 3 and s.iter.args[0] == A.Int(0)
               and isinstance(s.iter.args[2], A.Int)), None)
    if at is None:
        return None
    loop: A.For = kernel.body[at]  # type: ignore[assignment]
    k_tile = loop.iter.args[2].value  # type: ignore[attr-defined]
    bars = [i for i, s in enumerate(loop.body) if is_call_stmt(s, "syncthreads")]
    if k_tile % 2 or len(bars) != 2 or bars[1] != len(loop.body) - 1 or bars[0] != len(loop.body) - 3:
        return None
    copies, compute = loop.body[:bars[0]], loop.body[bars[0] + 1]
    k_dims: dict[str, int] = {}
    new_copies = [_halve_copy(c, loop.var, k_tile, decls, k_dims) for c in copies]
    steps = const_range(compute)
    if not copies or None in new_copies or steps is None or steps % 2 or not k_dims:
        return None
    new_decls = {name: _halve_decl(decls[name], dim) for name, dim in k_dims.items()}
    if None in new_decls.values():
        return None
    half = k_tile // 2
    body = (*new_copies, loop.body[bars[0]], with_range(compute, steps // 2), loop.body[-1])
    new_loop = dataclasses.replace(with_range(loop, 0, loop.iter.args[1], half), body=body)  # type: ignore[attr-defined]
    by_id = {id(decls[n]): d for n, d in new_decls.items()}
    out = [by_id.get(id(s), s) for s in kernel.body]
    out[at] = new_loop
    return dataclasses.replace(kernel, body=tuple(out))


def _halve_copy(c, k_var: str, k_tile: int, decls: dict[str, A.Assign], k_dims: dict[str, int]):
    """A copy loop moving half the elements; records the K dimension of each shared tile it fills."""
    trip = const_range(c)
    if trip is None or trip % 2 or not c.body or not isinstance(c.body[0], A.Assign):
        return None
    index = c.body[0]
    new_index = _halve_index(index.value, c.var, trip)
    if new_index is None or not isinstance(index.target, A.Name):
        return None
    stmts = []
    for s in c.body[1:]:
        if not (isinstance(s, A.Assign) and isinstance(s.target, A.Subscript) and isinstance(s.target.value, A.Name)
                and s.target.value.id in decls and isinstance(s.value, A.Subscript)):
            return None
        k_pos = [p for p, x in enumerate(s.value.indices) if mentions(x, k_var)]
        if len(k_pos) != 1 or k_dims.setdefault(s.target.value.id, k_pos[0]) != k_pos[0]:
            return None
        if k_pos[0] == len(s.target.indices) - 1:  # K is the row length: re-split the index
            s = _replace_divisor(s, index.target.id, k_tile, k_tile // 2)
        stmts.append(s)
    return dataclasses.replace(with_range(c, trip // 2), body=(A.Assign(index.target, new_index), *stmts))


def _halve_index(x: A.Expr, e: str, trip: int) -> A.Expr | None:
    """The copy mapping for trip/2 elements per thread: chunked `t * E + e` gets E/2, coalesced
    `e * T + t` is unchanged, vectors `(e // V * T + t) * V + e % V` need V | E/2."""
    if not isinstance(x, A.BinOp) or x.op != "+":
        return None
    if x.right == A.Name(e) and isinstance(x.left, A.BinOp) and x.left.op == "*" and x.left.right == A.Int(trip):
        return dataclasses.replace(x, left=dataclasses.replace(x.left, right=A.Int(trip // 2)))
    if isinstance(x.left, A.BinOp) and x.left.op == "*" and x.left.left == A.Name(e):
        return x
    r = x.right
    if isinstance(r, A.BinOp) and r.op == "%" and r.left == A.Name(e) and isinstance(r.right, A.Int):
        return x if (trip // 2) % r.right.value == 0 else None  # vectors of r.right values
    return None


def _replace_divisor(s: A.Assign, index: str, old: int, new: int) -> A.Assign:
    def fn(n):
        if isinstance(n, A.BinOp) and n.op in ("//", "%") and n.left == A.Name(index) and n.right == A.Int(old):
            return A.BinOp(n.op, n.left, A.Int(new))
        return None

    return rewrite(s, fn)


def _halve_decl(decl: A.Assign, dim: int) -> A.Assign | None:
    call: A.Call = decl.value  # type: ignore[assignment]
    dims = [d.value for d in call.args[1].elts]  # type: ignore[attr-defined]
    if dims[dim] % 2:
        return None
    dims[dim] //= 2
    kwargs = []
    for kw in call.kwargs:
        if kw.name != "layout":
            kwargs.append(kw)
            continue
        sw = _swizzled_row_major(kw.value)
        if sw is None or sw not in valid_swizzles(*dims):
            return None
        kwargs.append(A.Keyword("layout", A.BinOp("@", A.Call(A.Name("swizzle"), tuple(A.Int(v) for v in sw)),
                                                  A.Call(A.Name("row_major"), tuple(A.Int(d) for d in dims)))))
    args = (call.args[0], A.Tuple(tuple(A.Int(d) for d in dims)))
    return A.Assign(decl.target, dataclasses.replace(call, args=args, kwargs=tuple(kwargs)))


def _swizzled_row_major(x: A.Expr) -> tuple[int, int, int] | None:
    """(b, m, s) of `swizzle(b, m, s) @ row_major(r, c)`."""
    if (isinstance(x, A.BinOp) and x.op == "@" and isinstance(x.left, A.Call) and x.left.func_name == "swizzle"
            and isinstance(x.right, A.Call) and x.right.func_name == "row_major"
            and all(isinstance(a, A.Int) for a in x.left.args) and len(x.left.args) == 3):
        return tuple(a.value for a in x.left.args)  # type: ignore[return-value]
    return None


def mfma_32x32x8_to_16x16x16(module: A.Module) -> A.Module:
    """Switch instruction shape: a wave's 32x32 tile computed by one v_mfma_f32_32x32x8_bf16 per
    K step of 8 becomes 2x2 v_mfma_f32_16x16x16_bf16 per K step of 16 (four 4-value accumulators;
    operand and result lane maps follow the 16x16x16 layout), and the epilogue stores the four
    accumulators. Recognises the compute loop and epilogue exactly as `strategies.render` writes
    them, for any row/column base expressions; needs an even number of 8-wide K steps."""
    text = printer.module(module)
    compute = _template(mfma32_compute("\x01", "\x02", "\x03", "\x04"))  # type: ignore[arg-type]
    epilogue = _template(mfma32_epilogue("\x01", "\x02"))
    mc, me = re.search(compute, text), re.search(epilogue, text)
    if mc is None or me is None or int(mc.group("n")) % 2:
        return module
    new_compute = "\n".join(mfma16_compute(mc.group("a"), mc.group("b"), int(mc.group("n")) // 2, mc.group("i")))
    new_epilogue = "\n".join(mfma16_epilogue(me.group("a"), me.group("b")))
    text = text[:me.start()] + new_epilogue + text[me.end():]
    text = text[:mc.start()] + new_compute + text[mc.end():]
    text = text.replace("    acc = local(f32, (16,), init=0)\n", "\n".join(MFMA16_ACCUMULATORS) + "\n", 1)
    if re.search(r"\bacc\b|mfma_f32_32x32x8_bf16\(", text):
        return module  # the accumulator or the old instruction is used elsewhere
    return parse_text(text.replace("mfma_f32_32x32x8_bf16", "mfma_f32_16x16x16_bf16"), "switched.ave")


def _template(lines: list[str]) -> str:
    """A regex matching the lines with placeholders \\x01 (a), \\x02 (b), \\x03 (n), \\x04 (i)."""
    pattern = re.escape("\n".join(lines))
    groups = {"\x01": ("a", r"[^\n]+?"), "\x02": ("b", r"[^\n]+?"), "\x03": ("n", r"\d+"), "\x04": ("i", " *")}
    for mark, (name, rx) in groups.items():
        pattern = pattern.replace(mark, f"(?P<{name}>{rx})", 1).replace(mark, f"(?P={name})")
    return "(?m)^" + pattern + "$"
