"""AMDGPU target hooks: what differs from the shared lowering on AMD CDNA3 (gfx942, MI300X).

Kernels use the `amdgpu_kernel` calling convention (LLVM lays the arguments out in the kernarg
segment), tensors are `ptr addrspace(1)`, LDS one `addrspace(3)` module global, stack slots
`addrspace(5)`; ids are `llvm.amdgcn.workitem.id.*` / `workgroup.id.*`; a barrier is
`s_barrier` between workgroup-scope release and acquire fences (what HIP's __syncthreads emits);
matrix instructions are the `llvm.amdgcn.mfma.*` intrinsics with operands packed per lane in the
slot order of hw/instructions.py; lane exchange is DPP (`quad_perm`) for xor 1 and 2, and
`ds_bpermute` otherwise (../shared/reference/backends-toolchain.md).
"""
from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm
from llvmlite import ir

from ave_decl.codegen import CodegenTarget, LoweredKernel, initialise
from ave_decl.codegen.errors import CodegenError
from ave_decl.hw.instructions import Instruction, LoadMatrix

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
TRIPLE = "amdgcn-amd-amdhsa"
ARCHS = ("gfx942",)
FEATURES = "+sramecc,-xnack"  # MI300X's code objects: SRAM ECC on, XNACK off
SHARED = "__ave_lds"
LDS_BYTES = 65536  # per workgroup on gfx942
# Code object v5, what ROCm 5.x/6.x compilers write and load (LLVM 22 alone would write v6,
# which older runtimes refuse); clang records the choice as this module flag.
CODE_OBJECT_VERSION = 500

# DPP quad_perm controls: lane i of each quad reads lane perm[i] of the same quad.
_QUAD_PERM = {1: (1, 0, 3, 2), 2: (2, 3, 0, 1)}


@lru_cache(maxsize=None)
def machine(arch: str) -> llvm.TargetMachine:
    initialise()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=FEATURES, opt=3)


def mfma_intrinsic(instr: Instruction, dtype: str) -> tuple[str, ir.Type]:
    """LLVM's intrinsic for an AMD matrix instruction and the per-lane operand type of A and B."""
    m, k = instr.m, instr.k
    per_lane = instr.a.values
    if dtype == "bf16":
        return f"llvm.amdgcn.mfma.f32.{m}x{m}x{k}bf16.1k", ir.VectorType(I16, per_lane)
    if dtype == "f16":
        return f"llvm.amdgcn.mfma.f32.{m}x{m}x{k}f16", ir.VectorType(ir.HalfType(), per_lane)
    if dtype in ("fp8", "bf8"):  # eight 8-bit values per lane travel as one i64
        return f"llvm.amdgcn.mfma.f32.{m}x{m}x{k}.{dtype}.{dtype}", I64
    raise CodegenError(f"{instr.name} has no gfx942 form for element type {dtype}")


class KernelAttributes(ir.values.FunctionAttributes):
    """Function attributes plus LLVM string attributes ("key"="value"), which llvmlite's set rejects."""

    def __init__(self, strings: dict[str, str]) -> None:
        super().__init__()
        self.strings = strings

    def __bool__(self) -> bool:
        return True

    def _to_list(self, ret_type):
        return super()._to_list(ret_type) + [f'"{k}"="{v}"' for k, v in sorted(self.strings.items())]


class AmdgpuTarget(CodegenTarget):
    name = "amdgpu"
    triple = TRIPLE
    global_space = 1
    shared_space = 3
    private_space = 5
    max_group = 64

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.data_layout = str(machine(arch).target_data)

    def begin_kernel(self, module, name, params):
        self.module = module
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=name)
        fn.calling_convention = "amdgpu_kernel"
        return fn, list(fn.args)

    def thread_id(self, b, dim):
        return self.call(b, f"llvm.amdgcn.workitem.id.{'xyz'[dim]}", I32, [])

    def block_id(self, b, dim):
        return self.call(b, f"llvm.amdgcn.workgroup.id.{'xyz'[dim]}", I32, [])

    def barrier(self, b):
        # LDS writes before the barrier are visible after it: release, s_barrier, acquire
        b.fence("release", "workgroup")
        self.call(b, "llvm.amdgcn.s.barrier", ir.VoidType(), [])
        b.fence("acquire", "workgroup")

    def shared_array(self, b, module, name, elem, count, offset):
        return self.static_shared(b, module, SHARED, offset)

    # ------------------------------------------------------- lane exchange
    def _lane_of(self, b: ir.IRBuilder, value: ir.Value, src_lane: ir.Value) -> ir.Value:
        """`ds_bpermute`: this lane reads `value` of lane `src_lane` (byte address 4 * lane)."""
        bits = b.bitcast(value, I32)
        addr = b.shl(src_lane, ir.Constant(I32, 2))
        return b.bitcast(self.call(b, "llvm.amdgcn.ds.bpermute", I32, [addr, bits]), F32)

    def shuffle_xor(self, b, value, mask, lane):
        if mask in _QUAD_PERM:  # within a quad: DPP, no LDS traffic
            p = _QUAD_PERM[mask]
            ctrl = p[0] | p[1] << 2 | p[2] << 4 | p[3] << 6
            bits = b.bitcast(value, I32)
            moved = self.call(b, "llvm.amdgcn.update.dpp.i32", I32,
                               [ir.Constant(I32, 0), bits, ir.Constant(I32, ctrl), ir.Constant(I32, 0xF),
                                ir.Constant(I32, 0xF), ir.Constant(ir.IntType(1), 1)])
            return b.bitcast(moved, F32)
        return self._lane_of(b, value, b.xor(lane, ir.Constant(I32, mask)))

    def shuffle(self, b, value, src_lane, lane):
        if isinstance(src_lane, ir.Constant):  # one lane for the whole wave: a scalar read
            bits = self.call(b, "llvm.amdgcn.readlane.i32", I32, [b.bitcast(value, I32), src_lane])
            return b.bitcast(bits, F32)
        return self._lane_of(b, value, src_lane)

    # ---------------------------------------------------- matrix instructions
    def _vector(self, b: ir.IRBuilder, values: list[ir.Value], ty: ir.Type) -> ir.Value:
        if ty == I64:  # 8-bit elements, element v in byte v
            word = ir.Constant(I64, 0)
            for v, x in enumerate(values):
                word = b.or_(word, b.shl(b.zext(x, I64), ir.Constant(I64, 8 * v)))
            return word
        vec = ir.Constant(ty, ir.Undefined)
        for v, x in enumerate(values):
            if isinstance(ty.element, ir.HalfType):
                x = b.bitcast(x, ty.element)
            vec = b.insert_element(vec, x, ir.Constant(I32, v))
        return vec

    def mma(self, b, instr: Instruction, dtype, a, bv, c, lane):
        if instr.vendor != "amdgpu":
            raise CodegenError(f"{instr.name} is not an AMD matrix instruction")
        name, operand = mfma_intrinsic(instr, dtype)
        acc_ty = ir.VectorType(F32, instr.c.values)
        acc = self._vector(b, list(c), acc_ty)
        zero = ir.Constant(I32, 0)  # cbsz, abid, blgp: no broadcast, no lane-group swizzle
        d = self.call(b, name, acc_ty, [self._vector(b, a, operand), self._vector(b, bv, operand), acc,
                                         zero, zero, zero])
        return [b.extract_element(d, ir.Constant(I32, i)) for i in range(instr.c.values)]

    def ldmatrix(self, b, lm: LoadMatrix, row, lane):
        raise CodegenError(f"{lm.name} is an NVIDIA instruction; gfx942 has no ldmatrix")

    def finish(self, module, fn, info: LoweredKernel):
        if info.shared_bytes > LDS_BYTES:
            raise CodegenError(f"{info.symbol} uses {info.shared_bytes} bytes of LDS; a gfx942 workgroup has "
                               f"{LDS_BYTES}")
        self.size_static_shared(info, 16)
        flags = module.add_named_metadata("llvm.module.flags")
        flags.add(module.add_metadata([ir.Constant(I32, 1), "amdhsa_code_object_version",
                                       ir.Constant(I32, CODE_OBJECT_VERSION)]))
        threads = max(1, info.threads)
        fn.attributes = KernelAttributes({"amdgpu-flat-work-group-size": f"{threads},{threads}",
                                          "uniform-work-group-size": "true"})
