"""The amdgpu backend offline: LLVM IR and gfx942 assembly checked with FileCheck, every AMD
example compiled, MFMA / LDS / DPP instructions where the kernels use them, no spills in the
example GEMMs, the resource report, code objects when ld.lld is installed, and the documented
refusals (no AMD GPU is available to this project: docs/backends.md)."""
from __future__ import annotations

from pathlib import Path

import pytest
from codegen_support import EXAMPLES, kernels_of
from test_codegen_nvptx import filecheck

from ave_decl.codegen import CodegenError, ToolchainError, get_backend
from ave_decl.hw.instructions import Instruction
from ave_decl.lang.parser import parse_text
from ave_decl.lang.resolve import resolve_imports

amdgpu = get_backend("amdgpu")
ALL = sorted(EXAMPLES.glob("*.ave")) + sorted(EXAMPLES.glob("*/*.ave"))
AMD = [p for p in ALL if all(amdgpu.applies(k, kernels_of(p)[2]) is None for k in kernels_of(p)[1].kernels)]
REFUSED = [p for p in ALL if p not in AMD]
GEMMS = [p for p in AMD if p.stem.startswith("gemm")]


def _linker_missing() -> str | None:
    from ave_amdgpu.toolchain import linker_problem

    return linker_problem()


needs_linker = pytest.mark.skipif(_linker_missing() is not None, reason=f"{_linker_missing()}")


def compile_example(path: Path, stage: str):
    _, module, imports = kernels_of(path)
    return [amdgpu.compile(k, imports, None, stage, barriers_proven=True) for k in module.kernels]


def compile_text(text: str, stage: str):
    module = parse_text(text, "k.ave")
    return amdgpu.compile(module.kernels[0], resolve_imports(module), None, stage)


def mnemonic(instr: Instruction) -> str:
    """The gfx942 assembly name of an AMD matrix instruction (mfma_f32_32x32x8_bf16 -> v_mfma_...)."""
    return f"v_{instr.name}"


def test_the_amd_examples_are_the_ones_amdgpu_applies_to():
    names = {p.stem for p in AMD}
    assert {"gemm_lds_mfma", "gemm_mfma16", "flash_attention_gqa", "fused_moe", "fa_fwd_gfx942"} <= names
    assert {p.stem for p in REFUSED} == {"gemm_mma_ldmatrix", "gemm_mma_pipelined"}  # the NVIDIA examples


@pytest.mark.parametrize("path", REFUSED, ids=lambda p: p.stem)
def test_an_nvidia_example_is_refused_in_one_line_naming_the_instruction(path):
    with pytest.raises(CodegenError) as info:
        compile_example(path, "asm")
    message = info.value.message
    assert "\n" not in message and "(nvidia); target amdgpu compiles amdgpu kernels" in message
    assert info.value.span is not None


@pytest.mark.parametrize("path", AMD, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_amd_example_compiles_to_gfx942_assembly_and_a_code_object(path):
    """Up to the code object where ld.lld is installed, else to the relocatable object: each stage
    runs LLVM's code generation on its own copy of the module (it rewrites the module in place)."""
    _, module, imports = kernels_of(path)
    last = "obj" if _linker_missing() else "hsaco"
    for k, c in zip(module.kernels, compile_example(path, last)):
        assert c.artifacts[last].data[:4] == b"\x7fELF"
        asm = c.artifacts["asm"].text
        assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"' in asm
        assert f".amdhsa_kernel {k.name}" in asm
        for name, instr in imports.items():
            if isinstance(instr, Instruction) and f"{name}(" in path.read_text():
                assert mnemonic(instr) in asm, f"{k.name} uses {name} but its assembly has no {mnemonic(instr)}"
        if c.resources["shared_bytes"]:  # (LLVM removes LDS whose reads reach no output)
            assert "ds_write" in asm and "ds_read" in asm, f"{k.name} uses LDS without ds_read/ds_write"
            assert c.resources["shared_bytes"] == c.info.shared_bytes
        assert ".amdhsa_code_object_version 5" in asm
        assert {"vgprs", "agprs", "sgprs", "scratch_bytes", "vgpr_spills", "occupancy_waves_per_simd"} <= set(c.resources)


@pytest.mark.parametrize("path", GEMMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_example_gemms_do_not_spill(path):
    for c in compile_example(path, "asm"):
        r = c.resources
        assert r["vgpr_spills"] == 0 and r["sgpr_spills"] == 0 and r["scratch_bytes"] == 0, (c.name, r)


def test_llir_of_the_lds_gemm(tmp_path):
    (c,) = compile_example(EXAMPLES / "gemm_lds_mfma.ave", "llir")
    filecheck(c.artifacts["llir"].text, """
CHECK: target triple = "amdgcn-amd-amdhsa"
CHECK: @__ave_lds = internal {{.*}}addrspace(3) global [16384 x i8] undef, align 16
CHECK: define amdgpu_kernel void @gemm_lds_mfma(ptr addrspace(1) noalias {{.*}}%A, ptr addrspace(1) noalias {{.*}}%B, ptr addrspace(1) noalias {{.*}}%C, i32 {{.*}}%M, i32 {{.*}}%K, i32 {{.*}}%N)
CHECK-DAG: @llvm.amdgcn.workitem.id.x()
CHECK-DAG: @llvm.amdgcn.workgroup.id.x()
CHECK: fence syncscope("workgroup") release
CHECK-NEXT: tail call void @llvm.amdgcn.s.barrier()
CHECK-NEXT: fence syncscope("workgroup") acquire
CHECK: call <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16> {{.*}}, <4 x i16> {{.*}}, <16 x float> {{.*}}, i32 0, i32 0, i32 0)
CHECK: "amdgpu-flat-work-group-size"="256,256"
""", tmp_path)


def test_assembly_of_the_lds_gemm(tmp_path):
    (c,) = compile_example(EXAMPLES / "gemm_lds_mfma.ave", "asm")
    # accumulators are AGPRs (a[..]) or VGPRs (v[..]) depending on the LLVM build: accept both
    filecheck(c.artifacts["asm"].text, """
CHECK: gemm_lds_mfma:
CHECK-DAG: global_load_dwordx4
CHECK-DAG: ds_write_b128
CHECK-DAG: s_barrier
CHECK-DAG: ds_read
CHECK: v_mfma_f32_32x32x8_bf16 {{[av]}}[{{[0-9]+}}:{{[0-9]+}}], v[{{[0-9]+}}:{{[0-9]+}}], v[{{[0-9]+}}:{{[0-9]+}}], {{[av]}}[{{[0-9]+}}:{{[0-9]+}}]
CHECK: s_endpgm
CHECK: .amdhsa_group_segment_fixed_size 16384
CHECK: .amdhsa_private_segment_fixed_size 0
CHECK: .wavefront_size: 64
""", tmp_path)


def test_the_16x16x16_gemm_uses_its_instruction(tmp_path):
    (c,) = compile_example(EXAMPLES / "gemm_mfma16.ave", "llir")
    assert "@llvm.amdgcn.mfma.f32.16x16x16bf16.1k(<4 x i16>" in c.artifacts["llir"].text
    (c,) = compile_example(EXAMPLES / "gemm_mfma16.ave", "asm")
    filecheck(c.artifacts["asm"].text, "CHECK: v_mfma_f32_16x16x16_bf16 {{[av]}}[{{[0-9]+}}:{{[0-9]+}}]\n", tmp_path)


F16_GEMM = """
from ave.amdgpu import {instr}

@kernel(grid=(1, 1), block=64, wave=64, reference="C = A @ B")
def f16_mfma(A: global[f16, ({m}, {k})], B: global[f16, ({k}, {m})], C: global[f32, ({m}, {m})]):
    lane = lane_id()
    a = local(f16, {kpl})
    b = local(f16, {kpl})
    for v in range({kpl}):
        a[v] = A[lane % {m}, {kpl} * (lane // {m}) + v]
        b[v] = B[{kpl} * (lane // {m}) + v, lane % {m}]
    c = local(f32, {acc}, init=0.0)
    d = {instr}(a, b, c)
    for v in range({acc}):
        C[{row}, lane % {m}] = d[v]
"""


@pytest.mark.parametrize("m,k", [(32, 8), (16, 16)])
def test_the_f16_forms_use_their_intrinsics_and_run_on_the_host(m, k, tmp_path):
    from codegen_support import run_on

    kpl = m * k // 64
    acc, row = (16, "8 * (v // 4) + 4 * (lane // 32) + v % 4") if m == 32 else (4, "4 * (lane // 16) + v")
    instr = f"mfma_f32_{m}x{m}x{k}_f16"
    text = F16_GEMM.format(instr=instr, m=m, k=k, kpl=kpl, acc=acc, row=row)
    c = compile_text(text, "asm")
    assert f"@llvm.amdgcn.mfma.f32.{m}x{m}x{k}f16(<4 x half>" in c.artifacts["llir"].text
    assert f"v_mfma_f32_{m}x{m}x{k}_f16" in c.artifacts["asm"].text
    result, _, _ = run_on("host", text, {})
    assert result["ok"], result


def test_lane_exchange_is_dpp_within_a_quad_and_ds_bpermute_across(tmp_path):
    (c,) = compile_example(EXAMPLES / "lanes" / "lane_exchange.ave", "asm")
    filecheck(c.artifacts["asm"].text, """
CHECK-DAG: ds_bpermute_b32
CHECK-DAG: quad_perm:[1,0,3,2]
CHECK-DAG: v_readlane_b32
""", tmp_path)


def test_stack_slots_live_in_the_private_address_space():
    (c,) = compile_example(EXAMPLES / "production" / "fa_fwd_gfx942.ave", "llir")
    unoptimised = str(c.module)
    allocas = [line for line in unoptimised.splitlines() if " = alloca " in line]
    assert allocas and all(line.endswith("addrspace(5)") for line in allocas), allocas[:3]


def test_occupancy_estimate_follows_the_cdna3_limits():
    from ave_amdgpu.resources import occupancy

    assert occupancy(64, 32, 0, 256) == (8, "waves")
    assert occupancy(131, 44, 16384, 256) == (3, "VGPRs")  # 512 // 136
    assert occupancy(64, 32, 49152, 256) == (1, "LDS")  # one 4-wave group per CU
    assert occupancy(128, 20, 49152, 512) == (2, "LDS")  # 8 waves of one group over 4 SIMDs
    assert occupancy(256, 20, 0, 512) == (2, "VGPRs")


@needs_linker
def test_a_code_object_names_gfx942_in_its_note(tmp_path):
    from ave_amdgpu.toolchain import notes
    from elftools.elf.elffile import ELFFile

    (c,) = compile_example(EXAMPLES / "gemm_lds_mfma.ave", "hsaco")
    hsaco = c.artifacts["hsaco"].data
    assert hsaco[:4] == b"\x7fELF" and c.artifacts["obj"].data[:4] == b"\x7fELF"
    amd = [desc for owner, _, desc in notes(hsaco) if owner == "AMDGPU"]
    assert amd and b"amdgcn-amd-amdhsa--gfx942" in amd[0]
    assert c.resources["code_object"] == "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
    import io

    elf = ELFFile(io.BytesIO(hsaco))
    assert elf["e_type"] == "ET_DYN" and elf["e_machine"] == "EM_AMDGPU"
    assert elf["e_flags"] & 0xFF == 0x4C  # EF_AMDGPU_MACH_AMDGCN_GFX942
    symbols = {s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()}
    assert {"gemm_lds_mfma", "gemm_lds_mfma.kd"} <= symbols


@needs_linker
def test_emit_writes_the_code_object(ave, tmp_path):
    out = tmp_path / "k.hsaco"
    r = ave("emit", EXAMPLES / "gemm_lds_mfma.ave", "--target", "amdgpu", "--stage", "hsaco", "-o", out)
    assert r.code == 0, r.err
    assert out.read_bytes()[:4] == b"\x7fELF"
    assert "code object for amdgcn-amd-amdhsa--gfx942" in r.err and "VGPRs" in r.err


def test_without_a_linker_the_hsaco_stage_stops_with_the_reason(ave, tmp_path, monkeypatch):
    monkeypatch.setenv("AVE_LD_LLD", str(tmp_path / "no-such-ld.lld"))
    with pytest.raises(ToolchainError, match="AVE_LD_LLD=.* is not a file"):
        compile_example(EXAMPLES / "gemm_lds_mfma.ave", "hsaco")
    monkeypatch.delenv("AVE_LD_LLD")
    monkeypatch.setenv("PATH", str(tmp_path))
    from ave_amdgpu import toolchain

    monkeypatch.setattr(toolchain, "SYSTEM_DIRS", (tmp_path,))
    with pytest.raises(ToolchainError, match="no ld.lld here.*apt-get install lld-19.*--stage obj"):
        toolchain.locate_linker()
    (c,) = compile_example(EXAMPLES / "gemm_lds_mfma.ave", "obj")  # the object needs no linker
    assert c.artifacts["obj"].data[:4] == b"\x7fELF"


def test_emit_prints_the_mfma_assembly(ave):
    r = ave("emit", EXAMPLES / "gemm_lds_mfma.ave", "--target", "amdgpu", "--stage", "asm")
    assert r.code == 0, r.err
    assert "v_mfma_f32_32x32x8_bf16" in r.out
    assert "occupancy" in r.err and "waves/SIMD on MI300X" in r.err


def test_run_on_an_amd_gpu_or_the_documented_refusal(ave):
    problem = amdgpu.device_available()
    r = ave("run", EXAMPLES / "gemm_lds_mfma.ave", "--target", "amdgpu", "--sizes", "M=64,N=128,K=64")
    if problem is not None:
        assert r.code == 2 and "cannot run on target amdgpu" in r.err and len(r.err.strip().splitlines()) == 1, r
    else:  # an AMD GPU is here: the emitted kernel must match its reference
        assert r.code == 0 and r.out.startswith("ok"), r.out + r.err
