"""The host target: the shared lowering compiled for this CPU and run by `host_launch`.

One OS thread per GPU thread of a block, so barriers are real (`pthread_barrier_wait`) and a
race-free kernel's result does not depend on the schedule. What is emulated, and only that:
the warp/wave operations. Each lane writes its operand words to its warp's exchange area, the
warp meets at a warp barrier, each lane computes its own result slots from the others' words
with the lane maps of hw/instructions.py (tables baked into the module), and the warp meets
again before the area is reused. `shuffle_xor`, `mma`/`mfma` and `ldmatrix` work this way;
asynchronous copies land at once (a valid schedule of `cp.async`).
"""
from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ..hw.instructions import Instruction, LoadMatrix
from ..lang.operand_maps import slot_maps
from .dtypes import F32, I16, I32, I64, load_convert
from .llvm import initialise
from .target import CodegenTarget, LoweredKernel

PTR = ir.PointerType()
EXCHANGE_WORDS = 64  # 4-byte words of exchange per lane (the largest operand set: 8 + 4 + 16 + room)
# The thread context the launcher fills for every thread (host_launch.CTX_FIELDS):
# tid[4], bid[4], shared, block barrier, warp barrier, warp exchange, argument block
CTX = ir.LiteralStructType([ir.ArrayType(I32, 4), ir.ArrayType(I32, 4), PTR, PTR, PTR, PTR, PTR])
TID, BID, SHARED, BLOCK_BARRIER, WARP_BARRIER, EXCHANGE, ARGS = range(7)
FAULT_WORD = "__ave_fault"  # the smallest access site that went out of bounds, NO_FAULT if none
NO_FAULT = 0xFFFFFFFF
SCRATCH = "__ave_scratch"  # where out-of-bounds accesses go (room for a 16-byte vector or ldmatrix row)
SCRATCH_WORDS = 16


@lru_cache(maxsize=None)
def host_machine() -> llvm.TargetMachine:
    """The machine used to optimise and print host code (shared; never handed to a JIT)."""
    return new_host_machine()


def new_host_machine() -> llvm.TargetMachine:
    """A fresh machine: an MCJIT engine takes ownership of its machine and frees it with itself."""
    initialise()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, jit=True)


class HostTarget(CodegenTarget):
    name = "host"
    max_group = 64
    checks_bounds = True

    def __init__(self) -> None:
        tm = host_machine()
        self.triple = llvm.get_process_triple()
        self.data_layout = str(tm.target_data)
        self.ctx: ir.Value | None = None
        self.tables: dict[str, ir.GlobalVariable] = {}

    # -------------------------------------------------------------- kernel
    def begin_kernel(self, module: ir.Module, name: str, params: list[ir.Type]):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] + params), name=name)
        self.ctx = fn.args[0]
        self.ctx.name = "ctx"
        self.module = module
        return fn, list(fn.args[1:])

    def _field(self, b: ir.IRBuilder, index: int, sub: int | None = None) -> ir.Value:
        path = [ir.Constant(I32, 0), ir.Constant(I32, index)] + ([ir.Constant(I32, sub)] if sub is not None else [])
        return b.load(b.gep(self.ctx, path, source_etype=CTX), typ=I32 if sub is not None else PTR)

    def thread_id(self, b, dim):
        return self._field(b, TID, dim)

    def block_id(self, b, dim):
        return self._field(b, BID, dim)

    def barrier(self, b):
        self._wait(b, self._field(b, BLOCK_BARRIER))

    def _wait(self, b: ir.IRBuilder, barrier: ir.Value) -> None:
        fn = self.module.globals.get("pthread_barrier_wait") or ir.Function(
            self.module, ir.FunctionType(I32, [PTR]), name="pthread_barrier_wait")
        b.call(fn, [barrier])

    # ------------------------------------------------------- bounds checks
    def guard(self, b, ptr, inside, site):
        """An access outside its buffer reads or writes a scratch slot instead of memory the
        process owns, and lowers the fault word to its site (the smallest faulting site wins,
        whatever the thread schedule): `ave run --unverified` of a kernel with an out-of-bounds
        store reports it instead of corrupting the heap."""
        with b.if_then(b.not_(inside), likely=False):
            b.atomic_rmw("umin", self._global(FAULT_WORD, I32, NO_FAULT), ir.Constant(I32, site), "monotonic")
        return b.select(inside, ptr, b.bitcast(self._global(SCRATCH, ir.ArrayType(I32, SCRATCH_WORDS), 0), ptr.type))

    def _global(self, name: str, ty: ir.Type, init: int) -> ir.GlobalVariable:
        g = self.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, ty, name=name)
            g.initializer = ir.Constant(ty, init if isinstance(ty, ir.IntType) else None)
            g.align = 16
        return g

    def shared_array(self, b, module, name, elem, count, offset):
        base = self._field(b, SHARED)
        return b.gep(base, [ir.Constant(I64, offset)], source_etype=ir.IntType(8))

    # ------------------------------------------------------ warp exchange
    def _word(self, b: ir.IRBuilder, lane: ir.Value, slot: int | ir.Value) -> ir.Value:
        """Pointer to 4-byte word `slot` of `lane`'s part of this warp's exchange area."""
        base = self._field(b, EXCHANGE)
        slot_v = ir.Constant(I32, slot) if isinstance(slot, int) else slot
        index = b.add(b.mul(lane, ir.Constant(I32, EXCHANGE_WORDS)), slot_v)
        return b.gep(base, [index], source_etype=I32)

    def _meet(self, b: ir.IRBuilder) -> None:
        self._wait(b, self._field(b, WARP_BARRIER))

    def shuffle_xor(self, b, value, mask, lane):
        b.store(value, self._word(b, lane, 0))
        self._meet(b)
        out = b.load(self._word(b, b.xor(lane, ir.Constant(I32, mask)), 0), typ=value.type)
        self._meet(b)
        return out

    def shuffle(self, b, value, src_lane, lane):
        b.store(value, self._word(b, lane, 0))
        self._meet(b)
        out = b.load(self._word(b, src_lane, 0), typ=value.type)
        self._meet(b)
        return out

    def _table(self, name: str, values: np.ndarray) -> ir.GlobalVariable:
        if name not in self.tables:
            ty = ir.ArrayType(I32, int(values.size))
            g = ir.GlobalVariable(self.module, ty, name=name)
            g.global_constant = True
            g.linkage = "internal"
            g.initializer = ir.Constant(ty, [int(x) for x in values.reshape(-1)])
            self.tables[name] = g
        return self.tables[name]

    def _lookup(self, b: ir.IRBuilder, table: ir.GlobalVariable, index: ir.Value) -> ir.Value:
        return b.load(b.gep(table, [ir.Constant(I32, 0), index]), typ=I32)

    def mma(self, b, instr: Instruction, dtype, a, bv, c, lane):
        """D[i, j] = C[i, j] + sum_k A[i, k] B[k, j] in f32, k in order, over the group's exchange."""
        na, nb = instr.a.values, instr.b.values
        words = [(x, s) for s, x in enumerate(load_convert(b, v, dtype) for v in a)]
        words += [(load_convert(b, v, dtype), na + s) for s, v in enumerate(bv)]
        words += [(v, na + nb + s) for s, v in enumerate(c)]
        for value, slot in words:
            b.store(value, self._word(b, lane, slot))
        self._meet(b)
        out_slot = self.entry_alloca(ir.ArrayType(F32, instr.c.values), f"{instr.name}.out")
        b.call(self._mma_helper(instr), [self._field(b, EXCHANGE), lane, out_slot])
        out = [b.load(b.gep(out_slot, [ir.Constant(I32, 0), ir.Constant(I32, r)]), typ=F32)
               for r in range(instr.c.values)]
        self._meet(b)
        return out

    def _mma_helper(self, instr: Instruction) -> ir.Function:
        """`__ave_<instr>(exchange, lane, out)`: this lane's D slots from the warp's exchange words;
        one out-of-line function per instruction keeps unrolled kernels small (and the JIT fast)."""
        name = f"__ave_{instr.name}"
        fn = self.module.globals.get(name)
        if fn is not None:
            return fn
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I32, PTR]), name=name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        exch, lane, out_ptr = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        tabs = mma_tables(instr)
        ta, tb, tc = (self._table(f"__ave_{instr.name}_{x}", tabs[x]) for x in ("a", "b", "c"))
        ci, cj = (self._table(f"__ave_{instr.name}_{x}", tabs[x]) for x in ("ci", "cj"))

        def word_at(index: ir.Value) -> ir.Value:
            return b.load(b.gep(exch, [index], source_etype=F32), typ=F32)

        for r in range(instr.c.values):
            at = b.add(b.mul(lane, ir.Constant(I32, instr.c.values)), ir.Constant(I32, r))
            i, j = self._lookup(b, ci, at), self._lookup(b, cj, at)
            acc = word_at(self._lookup(b, tc, b.add(b.mul(i, ir.Constant(I32, instr.n)), j)))
            acc = self._dot(b, instr, ta, tb, i, j, acc, word_at)
            b.store(acc, b.gep(out_ptr, [ir.Constant(I32, r)], source_etype=F32))
        b.ret_void()
        return fn

    def _dot(self, b: ir.IRBuilder, instr: Instruction, ta, tb, i, j, acc, word_at) -> ir.Value:
        """acc + sum over k of A[i, k] * B[k, j], as a loop over k (k = 0, 1, ... in order)."""
        pre = b.block
        head, body, done = (b.append_basic_block(f"mma.{x}") for x in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I32)
        total = b.phi(F32)
        k.add_incoming(ir.Constant(I32, 0), pre)
        total.add_incoming(acc, pre)
        b.cbranch(b.icmp_signed("<", k, ir.Constant(I32, instr.k)), body, done)
        b.position_at_end(body)
        x = word_at(self._lookup(b, ta, b.add(b.mul(i, ir.Constant(I32, instr.k)), k)))
        y = word_at(self._lookup(b, tb, b.add(b.mul(k, ir.Constant(I32, instr.n)), j)))
        nxt = b.fadd(total, b.fmul(x, y))
        k.add_incoming(b.add(k, ir.Constant(I32, 1)), body)
        total.add_incoming(nxt, body)
        b.branch(head)
        b.position_at_end(done)
        return total

    def ldmatrix(self, b, lm: LoadMatrix, row, lane):
        """Every lane publishes its row address; slot v (matrix v // 2, half v % 2) of lane l reads
        element (row, col) of that matrix (instructions.LoadMatrix) from the providing lane's row."""
        b.store(b.ptrtoint(row, I64), b.gep(self._field(b, EXCHANGE),
                                              [b.mul(lane, ir.Constant(I32, EXCHANGE_WORDS // 2))], source_etype=I64))
        self._meet(b)
        out = []
        four = ir.Constant(I32, 4)
        for v in range(2 * lm.matrices):
            h = ir.Constant(I32, v % 2)
            quad, pair = b.udiv(lane, four), b.urem(lane, four)
            twice = b.add(b.mul(pair, ir.Constant(I32, 2)), h)
            srow, scol = (twice, quad) if lm.trans else (quad, twice)
            provider = b.add(ir.Constant(I32, 8 * (v // 2)), srow)
            addr = b.load(b.gep(self._field(b, EXCHANGE), [b.mul(provider, ir.Constant(I32, EXCHANGE_WORDS // 2))],
                                source_etype=I64), typ=I64)
            ptr = b.inttoptr(b.add(addr, b.mul(b.zext(scol, I64), ir.Constant(I64, 2))), PTR)
            out.append(b.load(ptr, typ=I16))
        self._meet(b)
        return out

    def finish(self, module: ir.Module, fn: ir.Function, info: LoweredKernel) -> None:
        info.notes.append("host: warp operations emulated over a per-warp exchange; async copies land at issue")


@lru_cache(maxsize=None)
def mma_tables(instr: Instruction) -> dict[str, np.ndarray]:
    """Exchange word of every A[i, k], B[k, j], C[i, j] and the (i, j) of every C slot of every lane."""
    g = instr.group_size
    na, nb = instr.a.values, instr.b.values
    out = {"a": np.full((instr.m, instr.k), -1), "b": np.full((instr.k, instr.n), -1),
           "c": np.full((instr.m, instr.n), -1)}
    for key, op, base in (("a", instr.a, 0), ("b", instr.b, na), ("c", instr.c, na + nb)):
        rows, cols = slot_maps(op, g)
        for lane in range(g):
            for s in range(op.values):
                out[key][rows[lane, s], cols[lane, s]] = lane * EXCHANGE_WORDS + base + s
    rows, cols = slot_maps(instr.c, g)
    out["ci"], out["cj"] = rows.astype(np.int64), cols.astype(np.int64)
    for key in ("a", "b", "c"):
        if (out[key] < 0).any():
            raise ValueError(f"{instr.name}: operand {key} does not cover its matrix")
    return out
