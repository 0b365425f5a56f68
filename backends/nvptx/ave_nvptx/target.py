"""NVPTX target hooks: what differs from the shared lowering on NVIDIA GPUs (sm_80, sm_90a).

Tensors are `ptr addrspace(1)` kernel parameters, shared memory one `addrspace(3)` module global,
ids the `llvm.nvvm.read.ptx.sreg.*` registers; `mma.sync.m16n8k16`, `ldmatrix`, `cp.async`,
`shfl.sync.bfly` and `bar.sync` are LLVM's NVVM intrinsics (../shared/reference/backends-toolchain.md).
"""
from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite import ir

from ave_decl.codegen import CodegenTarget, LoweredKernel, initialise
from ave_decl.codegen.errors import CodegenError
from ave_decl.hw.instructions import Instruction, LoadMatrix

I16, I32 = ir.IntType(16), ir.IntType(32)
F32 = ir.FloatType()
TRIPLE = "nvptx64-nvidia-cuda"
ARCHS = ("sm_90a", "sm_80")
PTX_FEATURES = "+ptx80"  # PTX ISA 8.0: sm_90a needs it, sm_80 accepts it (ptxas 12.x)
SHARED = "__ave_shared"


@lru_cache(maxsize=None)
def machine(arch: str) -> llvm.TargetMachine:
    initialise()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=PTX_FEATURES, opt=3)


class NvptxTarget(CodegenTarget):
    name = "nvptx"
    triple = TRIPLE
    global_space = 1
    shared_space = 3
    max_group = 32

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.data_layout = str(machine(arch).target_data)

    def begin_kernel(self, module, name, params):
        self.module = module
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
        return fn, list(fn.args)

    def thread_id(self, b, dim):
        return self.call(b, f"llvm.nvvm.read.ptx.sreg.tid.{'xyz'[dim]}", I32, [])

    def block_id(self, b, dim):
        return self.call(b, f"llvm.nvvm.read.ptx.sreg.ctaid.{'xyz'[dim]}", I32, [])

    def barrier(self, b):
        self.call(b, "llvm.nvvm.barrier0", ir.VoidType(), [])

    def shared_array(self, b, module, name, elem, count, offset):
        return self.static_shared(b, module, SHARED, offset)

    def shuffle_xor(self, b, value, mask, lane):
        return self.call(b, "llvm.nvvm.shfl.sync.bfly.f32", F32,
                          [ir.Constant(I32, -1), value, ir.Constant(I32, mask), ir.Constant(I32, 31)])

    def shuffle(self, b, value, src_lane, lane):
        return self.call(b, "llvm.nvvm.shfl.sync.idx.f32", F32, [ir.Constant(I32, -1), value, src_lane,
                                                                   ir.Constant(I32, 31)])

    @staticmethod
    def _pack(b: ir.IRBuilder, halves: list[ir.Value]) -> list[ir.Value]:
        """Pairs of 16-bit elements as the .b32 registers of a fragment (element 2i in the low half)."""
        out = []
        for lo, hi in zip(halves[0::2], halves[1::2]):
            out.append(b.or_(b.zext(lo, I32), b.shl(b.zext(hi, I32), ir.Constant(I32, 16))))
        return out

    def mma(self, b, instr: Instruction, dtype, a, bv, c, lane):
        if instr.vendor != "nvidia" or (instr.m, instr.n, instr.k) != (16, 8, 16):
            raise CodegenError(f"{instr.name} is not an NVIDIA mma.sync instruction")
        ra, rb = self._pack(b, a), self._pack(b, bv)
        if dtype == "bf16":
            name = "llvm.nvvm.mma.m16n8k16.row.col.bf16"
        else:  # f16 operands travel as <2 x half>
            vec = ir.VectorType(ir.HalfType(), 2)
            ra, rb = [b.bitcast(x, vec) for x in ra], [b.bitcast(x, vec) for x in rb]
            name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
        ret = ir.LiteralStructType([F32] * 4)
        d = self.call(b, name, ret, ra + rb + list(c))
        return [b.extract_value(d, i) for i in range(4)]

    def ldmatrix(self, b, lm: LoadMatrix, row, lane):
        n = lm.matrices
        name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{'.trans' if lm.trans else ''}.b16"
        ret = I32 if n == 1 else ir.LiteralStructType([I32] * n)
        regs = self.call(b, name, ret, [row])
        out = []
        for r in range(n):
            reg = regs if n == 1 else b.extract_value(regs, r)
            out += [b.trunc(reg, I16), b.trunc(b.lshr(reg, ir.Constant(I32, 16)), I16)]
        return out

    def async_copy(self, b, dst, src, nbytes):
        kind = "cg" if nbytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes alone
        self.call(b, f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}", ir.VoidType(), [dst, src])
        return True

    def async_wait(self, b):
        self.call(b, "llvm.nvvm.cp.async.wait.all", ir.VoidType(), [])

    def async_commit(self, b):
        self.call(b, "llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])

    def async_wait_group(self, b, n):
        self.call(b, "llvm.nvvm.cp.async.wait.group", ir.VoidType(), [ir.Constant(I32, n)])

    def finish(self, module, fn, info: LoweredKernel):
        self.size_static_shared(info, 128)
        annotations = module.add_named_metadata("nvvm.annotations")
        annotations.add(module.add_metadata([fn, "kernel", ir.Constant(I32, 1)]))
        for axis, extent in zip("xyz", info.block):
            annotations.add(module.add_metadata([fn, f"reqntid{axis}", ir.Constant(I32, extent)]))
