"""Run a host-target kernel: a launch loop written in IR starts one pthread per GPU thread.

For each block in turn the loop zeroes shared memory, fills every thread's context (ids,
shared base, block barrier, its warp's barrier and exchange area, the argument block) and
creates the block's threads, then joins them. Starting threads from IR costs ~15 ms per 256-
thread block here; from Python it would be ~0.4 s (docs/backends.md). Memory the loop needs is
allocated by numpy and passed in, so the IR calls only pthread functions and memset.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from .abi import KernelSignature, TensorParam
from .dtypes import I8, I32, I64, NUMPY_STORAGE
from .errors import LaunchFailed
from .host import CTX, EXCHANGE_WORDS, FAULT_WORD, NO_FAULT, PTR, host_machine, new_host_machine
from .llvm import for_range, optimise
from .target import LoweredKernel

BARRIER_BYTES = 128  # room for a pthread_barrier_t (32 bytes on glibc x86-64 and aarch64)
ATTR_BYTES = 128  # room for a pthread_attr_t (56 / 64 bytes)
STACK_BYTES = 1 << 20  # per GPU thread, plus twice its register arrays (they live on the stack)
LAUNCH = "__ave_launch"



def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name=name)


def add_launcher(module: ir.Module, sig: KernelSignature, info: LoweredKernel, kernel: ir.Function) -> None:
    """`__ave_thread(ctx)` unpacks the argument block and calls the kernel; `__ave_launch(...)`
    runs the grid block by block."""
    params = [a.type for a in kernel.args[1:]]
    thread = ir.Function(module, ir.FunctionType(PTR, [PTR]), name="__ave_thread")
    b = ir.IRBuilder(thread.append_basic_block())
    ctx = thread.args[0]
    args_block = b.load(b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, 6)], source_etype=CTX), typ=PTR)
    values = []
    for i, ty in enumerate(params):
        slot = b.gep(args_block, [ir.Constant(I32, i)], source_etype=I64)
        values.append(b.load(slot, typ=PTR) if isinstance(ty, ir.PointerType) else b.trunc(b.load(slot, typ=I64), ty))
    b.call(kernel, [ctx] + values)
    b.ret(ir.Constant(PTR, None))

    create = _declare(module, "pthread_create", I32, [PTR, PTR, PTR, PTR])
    join = _declare(module, "pthread_join", I32, [I64, PTR])
    binit = _declare(module, "pthread_barrier_init", I32, [PTR, PTR, I32])
    bdestroy = _declare(module, "pthread_barrier_destroy", I32, [PTR])
    ainit = _declare(module, "pthread_attr_init", I32, [PTR])
    astack = _declare(module, "pthread_attr_setstacksize", I32, [PTR, I64])
    memset = _declare(module, "llvm.memset.p0.i64", ir.VoidType(), [PTR, I8, I64, ir.IntType(1)])

    T, G = sig.threads, sig.group
    W = math.ceil(T / G)
    launch = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, PTR, I64, PTR, PTR,
                                                                 I32, I32, I32]), name=LAUNCH)
    argb, ctxs, threads, barriers, shared, shared_bytes, exchange, attr, gx, gy, gz = launch.args
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    b.call(ainit, [attr])
    b.call(astack, [attr, ir.Constant(I64, STACK_BYTES + 2 * info.local_bytes)])
    b.call(binit, [barriers, ir.Constant(PTR, None), ir.Constant(I32, T)])
    for w in range(W):
        members = min(G, T - w * G)
        b.call(binit, [b.gep(barriers, [ir.Constant(I64, (1 + w) * BARRIER_BYTES)], source_etype=I8),
                       ir.Constant(PTR, None), ir.Constant(I32, members)])
    nblocks = b.mul(b.mul(gx, gy), gz)
    blk = b.alloca(I32)
    b.store(ir.Constant(I32, 0), blk)
    head, body, done = (launch.append_basic_block(x) for x in ("blocks", "block", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.load(blk)
    b.cbranch(b.icmp_signed("<", i, nblocks), body, done)
    b.position_at_end(body)
    bx = b.urem(i, gx)
    by = b.urem(b.udiv(i, gx), gy)
    bz = b.udiv(i, b.mul(gx, gy))
    b.call(memset, [shared, ir.Constant(I8, 0), shared_bytes, ir.Constant(ir.IntType(1), 0)])
    dims = list(sig.block) + [1] * (3 - len(sig.block))
    tslot = b.alloca(I32)

    def each_thread(label: str, body) -> None:
        """for t in range(T): body(t) -- a loop, so the launcher's size does not grow with T."""
        for_range(b, tslot, ir.Constant(I32, T), body, label)

    def start(t: ir.Value) -> None:
        c = b.gep(ctxs, [t], source_etype=CTX)
        lin = t
        for d in range(3):
            extent = ir.Constant(I32, dims[d])
            b.store(b.urem(lin, extent), b.gep(c, [ir.Constant(I32, 0), ir.Constant(I32, 0), ir.Constant(I32, d)],
                                               source_etype=CTX))
            lin = b.udiv(lin, extent)
        for d, v in enumerate((bx, by, bz)):
            b.store(v, b.gep(c, [ir.Constant(I32, 0), ir.Constant(I32, 1), ir.Constant(I32, d)], source_etype=CTX))
        w = b.zext(b.udiv(t, ir.Constant(I32, G)), I64)
        warp_barrier = b.gep(barriers, [b.mul(b.add(w, ir.Constant(I64, 1)), ir.Constant(I64, BARRIER_BYTES))],
                             source_etype=I8)
        warp_exchange = b.gep(exchange, [b.mul(w, ir.Constant(I64, G * EXCHANGE_WORDS * 4))], source_etype=I8)
        for f, v in enumerate((shared, barriers, warp_barrier, warp_exchange, argb)):
            b.store(v, b.gep(c, [ir.Constant(I32, 0), ir.Constant(I32, 2 + f)], source_etype=CTX))
        b.call(create, [b.gep(threads, [t], source_etype=I64), attr, thread, c])

    each_thread("start", start)
    each_thread("join", lambda t: b.call(join, [b.load(b.gep(threads, [t], source_etype=I64), typ=I64),
                                                ir.Constant(PTR, None)]))
    b.store(b.add(i, ir.Constant(I32, 1)), blk)
    b.branch(head)
    b.position_at_end(done)
    for w in range(W + 1):
        b.call(bdestroy, [b.gep(barriers, [ir.Constant(I64, w * BARRIER_BYTES)], source_etype=I8)])
    b.ret_void()


@dataclass
class HostKernel:
    """A JIT-compiled host kernel with its launcher; `run` executes the whole grid."""

    sig: KernelSignature
    info: LoweredKernel
    engine: llvm.ExecutionEngine
    module: llvm.ModuleRef

    def run(self, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        """Run on element arrays in storage form (bf16/f16 as uint16 bit patterns); returns the
        tensors after the run (copies), keyed by name."""
        grid = list(self.sig.grid_at(sizes)) + [1] * (3 - len(self.sig.grid))
        if any(g < 1 for g in grid):
            raise ValueError(f"the grid {tuple(grid)} is empty at these sizes")
        bufs = {}
        slots = np.zeros(max(1, len(self.sig.params)), np.int64)
        for i, p in enumerate(self.sig.params):
            if isinstance(p, TensorParam):
                arr = np.ascontiguousarray(arrays[p.name], dtype=NUMPY_STORAGE[p.dtype]).copy()
                if arr.shape != p.shape(sizes):
                    raise ValueError(f"{p.name} has shape {arr.shape}, the kernel expects {p.shape(sizes)}")
                bufs[p.name] = arr
                slots[i] = arr.ctypes.data
            else:
                slots[i] = sizes[p]
        T, G = self.sig.threads, self.sig.group
        W = math.ceil(T / G)
        ctx_size = CTX.get_abi_size(host_machine().target_data)
        ctxs = np.zeros(T * ctx_size, np.uint8)
        threads = np.zeros(T, np.uint64)
        barriers = np.zeros((W + 1) * BARRIER_BYTES, np.uint8)
        shared = np.zeros(max(16, self.info.shared_bytes), np.uint8)
        exchange = np.zeros(W * G * EXCHANGE_WORDS, np.uint32)
        attr = np.zeros(ATTR_BYTES, np.uint8)
        fn_type = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 5), ctypes.c_int64, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
        launch = fn_type(self.engine.get_function_address(LAUNCH))
        fault = self._fault_word()
        if fault is not None:
            fault.value = NO_FAULT
        launch(slots.ctypes.data, ctxs.ctypes.data, threads.ctypes.data, barriers.ctypes.data, shared.ctypes.data,
               shared.size if self.info.shared_bytes else 0, exchange.ctypes.data, attr.ctypes.data, *grid)
        if fault is not None and fault.value != NO_FAULT:
            span, name, access = self.info.access_sites[fault.value]
            raise LaunchFailed(f"out-of-bounds {access} {'to' if access == 'store' else 'from'} {name}: the host "
                               f"target checks every access (on a GPU this {access} would reach memory outside "
                               f"{name}); `ave check` shows the indices", span)  # type: ignore[arg-type]
        return bufs

    def _fault_word(self) -> ctypes.c_uint32 | None:
        """The module's fault word (host.guard), if the kernel accesses memory at all."""
        address = self.engine.get_global_value_address(FAULT_WORD)
        return ctypes.c_uint32.from_address(address) if address else None


def jit(module_ir: ir.Module, sig: KernelSignature, info: LoweredKernel, kernel: ir.Function) -> HostKernel:
    add_launcher(module_ir, sig, info, kernel)
    mod = llvm.parse_assembly(str(module_ir))
    mod.verify()
    optimise(mod, host_machine())
    engine = llvm.create_mcjit_compiler(mod, new_host_machine())  # the engine owns (and frees) its machine
    engine.finalize_object()
    return HostKernel(sig, info, engine, mod)


__all__ = ["HostKernel", "jit", "add_launcher"]
