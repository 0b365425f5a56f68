"""The hooks a target supplies to the shared lowering: only what differs between GPUs.

Everything else (control flow, arithmetic, layouts and swizzles, register arrays, casts, lane
reductions as butterflies of `shuffle_xor`) is lowered once in `lower.py` for every target.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir
from llvmlite.ir.instructions import AllocaInstr

from ..hw.instructions import Instruction, LoadMatrix


@dataclass
class LoweredKernel:
    """What launchers need beyond the IR: the symbol, shared bytes per block, launch facts."""

    symbol: str
    shared_bytes: int = 0
    local_bytes: int = 0  # register arrays per thread (the host sizes its thread stacks from it)
    threads: int = 0
    block: tuple[int, ...] = ()
    group: int = 0
    notes: list[str] = field(default_factory=list)
    # every memory access the lowering emitted, by site number: (span, buffer, "load" | "store");
    # a target that checks bounds reports a fault by site (the host: host_launch.HostKernel.run)
    access_sites: list[tuple[object, str, str]] = field(default_factory=list)


class PrivateAlloca(AllocaInstr):
    """`alloca T, addrspace(N)`: llvmlite prints allocas in address space 0 only."""

    def __init__(self, parent: ir.Block, ty: ir.Type, addrspace: int, name: str) -> None:
        super().__init__(parent, ty, None, name)
        self.type = ty.as_pointer(addrspace)  # typed, as llvmlite infers GEP and load types from it
        self.addrspace = addrspace

    def descr(self, buf: list[str]) -> None:
        buf.append(f"alloca {self.allocated_type}")
        if self.align is not None:
            buf.append(f", align {self.align}")
        buf.append(f", addrspace({self.addrspace})")
        if self.metadata:
            buf.append(self._stringify_metadata(leading_comma=True))


class CodegenTarget:
    """Base class of the target hooks. A target object serves one module (it may keep state)."""

    name = "abstract"
    triple = ""
    data_layout = ""
    global_space = 0  # address space of kernel tensor arguments
    shared_space = 0  # address space of block-shared buffers
    private_space = 0  # address space of per-thread stack slots (register arrays, variables)
    max_group = 64  # largest warp/wave the target executes
    checks_bounds = False  # guard() every access (the host target)
    entry: ir.IRBuilder | None = None  # set by the lowering: allocas go in the kernel's entry block

    def entry_alloca(self, ty: ir.Type, name: str) -> ir.Value:
        """A stack slot allocated once per kernel invocation (never inside a loop), cached by name."""
        slots = self.__dict__.setdefault("_slots", {})
        if name not in slots:
            slots[name] = self.alloca(self.entry, ty, name)  # type: ignore[arg-type]
        return slots[name]

    def alloca(self, b: ir.IRBuilder, ty: ir.Type, name: str = "") -> ir.Value:
        """A per-thread stack slot in `private_space` (AMDGPU's data layout puts allocas in
        address space 5; llvmlite's builder knows only address space 0)."""
        if self.private_space == 0:
            return b.alloca(ty, name=name)
        instr = PrivateAlloca(b.block, ty, self.private_space, name)
        b._insert(instr)
        return instr

    def call(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
        """Call the function `name` of `self.module` (set by begin_kernel), declaring it on first
        use with the arguments' types: how targets reach their intrinsics."""
        module: ir.Module = self.module  # type: ignore[attr-defined]
        fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=name)
        return b.call(fn, args)

    def static_shared(self, b: ir.IRBuilder, module: ir.Module, name: str, offset: int) -> ir.Value:
        """A pointer at byte `offset` of one module-wide `shared_space` byte array `name`, sized by
        `size_static_shared` once every array is known (NVPTX's and AMDGPU's shared memory)."""
        slot = self.__dict__.get("_shared")
        if slot is None:
            slot = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), name=name, addrspace=self.shared_space)
            slot.type = ir.PointerType(addrspace=self.shared_space)  # opaque: arrays of every element type live here
            self.__dict__["_shared"] = slot
        return b.gep(slot, [ir.Constant(ir.IntType(64), offset)], source_etype=ir.IntType(8))

    def size_static_shared(self, info: LoweredKernel, align: int) -> None:
        """Give the array of `static_shared` (if any) the block's shared bytes, at least 16."""
        slot = self.__dict__.get("_shared")
        if slot is not None:
            slot.value_type = ir.ArrayType(ir.IntType(8), max(16, info.shared_bytes))
            slot.align = align
            slot.linkage = "internal"
            slot.initializer = ir.Constant(slot.value_type, ir.Undefined)

    def begin_kernel(self, module: ir.Module, name: str, params: list[ir.Type]) -> tuple[ir.Function, list[ir.Value]]:
        """Declare the kernel; return it and its declared (visible) parameters in ABI order."""
        raise NotImplementedError

    def prologue(self, b: ir.IRBuilder, info: LoweredKernel) -> None:
        """Target set-up at the top of the kernel (e.g. the host reads its thread context)."""

    def thread_id(self, b: ir.IRBuilder, dim: int) -> ir.Value:
        raise NotImplementedError

    def block_id(self, b: ir.IRBuilder, dim: int) -> ir.Value:
        raise NotImplementedError

    def barrier(self, b: ir.IRBuilder) -> None:
        raise NotImplementedError

    def shared_array(self, b: ir.IRBuilder, module: ir.Module, name: str, elem: ir.Type, count: int,
                     offset: int) -> ir.Value:
        """A pointer (in `shared_space`) to `count` elements at byte `offset` of the block's shared memory."""
        raise NotImplementedError

    def guard(self, b: ir.IRBuilder, ptr: ir.Value, inside: ir.Value, site: int) -> ir.Value:
        """The pointer an access uses, given `inside` (i1: every coordinate within its extent and
        the offset within the buffer); called only when `checks_bounds`. GPU targets do not check:
        the verifier's bounds proofs stand for it; the host target, which runs unverified kernels
        in the tool's own process, redirects an access outside and records its site."""
        return ptr

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, mask: int, lane: ir.Value) -> ir.Value:
        """The f32 `value` of lane `lane ^ mask` of the same warp/wave (all lanes take part)."""
        raise NotImplementedError

    def shuffle(self, b: ir.IRBuilder, value: ir.Value, src_lane: ir.Value, lane: ir.Value) -> ir.Value:
        """The f32 `value` of lane `src_lane` (an i32 in [0, group)) of the same warp/wave."""
        raise NotImplementedError

    def mma(self, b: ir.IRBuilder, instr: Instruction, dtype: str, a: list[ir.Value], bv: list[ir.Value],
            c: list[ir.Value], lane: ir.Value) -> list[ir.Value]:
        """D = A B + C over a warp/wave. `a`, `bv` are raw bits of element type `dtype` (one of
        `instr.in_dtypes`: i16 for 16-bit types), `c` f32."""
        raise NotImplementedError

    def ldmatrix(self, b: ir.IRBuilder, lm: LoadMatrix, row: ir.Value, lane: ir.Value) -> list[ir.Value]:
        """`ldmatrix`: this lane supplies the shared address of one 16-byte row; returns 2 * matrices
        raw 16-bit values (slot v = matrix v // 2, half v % 2)."""
        raise NotImplementedError

    def async_copy(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int) -> bool:
        """Issue an asynchronous global -> shared copy of `nbytes`; False if the target has no such
        copy for that size (the lowering then copies synchronously, a valid refinement)."""
        return False

    def async_wait(self, b: ir.IRBuilder) -> None:
        """Wait for this thread's asynchronous copies."""

    def async_commit(self, b: ir.IRBuilder) -> None:
        """Close this thread's current group of asynchronous copies (cp.async.commit_group)."""

    def async_wait_group(self, b: ir.IRBuilder, n: int) -> None:
        """Wait until at most the `n` most recent committed groups are pending. Waiting for every
        copy is a valid refinement, and what a target without copy groups does."""
        self.async_wait(b)

    def finish(self, module: ir.Module, fn: ir.Function, info: LoweredKernel) -> None:
        """Target metadata (kernel annotations, launch bounds)."""
