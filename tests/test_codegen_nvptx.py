"""The nvptx backend offline: LLVM IR and PTX checked with FileCheck, ptxas for sm_80 and sm_90a,
SASS instructions, spills; the GPU launch where a GPU exists (else the documented refusal)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from codegen_support import EXAMPLES, SIZES, kernels_of
from test_codegen_host import vector_copy_kernel

from ave_decl.codegen import ToolchainError, get_backend
from ave_decl.lang.parser import parse_text
from ave_decl.lang.resolve import resolve_imports

nvptx = get_backend("nvptx")


def _ptxas_missing() -> str | None:
    from ave_nvptx.toolchain import locate

    try:
        locate("ptxas")
        locate("nvdisasm")
    except ToolchainError as exc:
        return exc.message
    return None


needs_toolchain = pytest.mark.skipif(_ptxas_missing() is not None, reason=f"{_ptxas_missing()}")
APPLICABLE = [p for p in sorted(EXAMPLES.glob("*.ave")) + sorted(EXAMPLES.glob("speed/*.ave"))
              if all(nvptx.applies(k, kernels_of(p)[2]) is None for k in kernels_of(p)[1].kernels)]
GEMMS = [p for p in APPLICABLE if p.stem.startswith("gemm")]


def compile_text(text: str, stage: str, arch: str = "sm_90a"):
    module = parse_text(text, "k.ave")
    return nvptx.compile(module.kernels[0], resolve_imports(module), arch, stage)


def compile_example(path: Path, stage: str, arch: str = "sm_90a"):
    _, module, imports = kernels_of(path)
    return [nvptx.compile(k, imports, arch, stage) for k in module.kernels]


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    tool = shutil.which("filecheck") or str(Path(sys.executable).with_name("filecheck"))
    (tmp_path / "checks").write_text(checks)
    (tmp_path / "input").write_text(text)
    r = subprocess.run([tool, str(tmp_path / "checks"), "--input-file", str(tmp_path / "input")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_nvidia_examples_are_the_ones_nvptx_applies_to():
    names = {p.stem for p in APPLICABLE}
    assert {"gemm_mma_ldmatrix", "gemm_naive", "untagged_operand"} <= names
    assert not names & {"gemm_lds_mfma", "flash_attention_gqa", "fused_moe"}


def test_ptx_of_the_mma_gemm(tmp_path):
    (c,) = compile_example(EXAMPLES / "gemm_mma_ldmatrix.ave", "ptx")
    filecheck(c.artifacts["ptx"].text, """
CHECK: .target sm_90a
CHECK: .visible .entry gemm_mma_ldmatrix(
CHECK-COUNT-3: .param .u64 .ptr .global
CHECK-COUNT-3: .param .u32
CHECK: .reqntid 128
CHECK: .shared .align 128 .b8
CHECK: bar.sync 0
CHECK-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
CHECK-DAG: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
CHECK: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
""", tmp_path)


def test_llir_of_the_naive_gemm_on_both_targets(tmp_path):
    (c,) = compile_example(EXAMPLES / "gemm_naive.ave", "llir")
    filecheck(c.artifacts["llir"].text, """
CHECK: target triple = "nvptx64-nvidia-cuda"
CHECK: define {{.*}}void @gemm_naive(ptr addrspace(1) noalias {{.*}}%A, ptr addrspace(1) noalias {{.*}}%B, ptr addrspace(1) noalias {{.*}}%C, i32 {{.*}}%M, i32 {{.*}}%K, i32 {{.*}}%N)
CHECK-DAG: @llvm.nvvm.read.ptx.sreg.tid.x()
CHECK-DAG: @llvm.nvvm.read.ptx.sreg.ctaid.y()
CHECK: fmul float
CHECK: fadd float
CHECK: !nvvm.annotations
""", tmp_path)
    _, module, imports = kernels_of(EXAMPLES / "gemm_naive.ave")
    host = get_backend("host").compile(module.kernels[0], imports, None, "llir")
    filecheck(host.artifacts["llir"].text, """
CHECK: define void @gemm_naive(ptr {{.*}}%ctx, ptr noalias {{.*}}%A, ptr noalias {{.*}}%B, ptr noalias {{.*}}%C, i32 %M, i32 %K, i32 %N)
CHECK: fmul float
CHECK: fadd float
""", tmp_path)


def test_a_vector_copy_is_one_cp_async_of_16_bytes(tmp_path):
    c = compile_text(vector_copy_kernel(), "ptx")
    filecheck(c.artifacts["ptx"].text, """
CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
CHECK: cp.async.wait_all
""", tmp_path)


@needs_toolchain
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("path", APPLICABLE, ids=lambda p: p.stem)
def test_ptxas_assembles_every_applicable_example(path, arch):
    for c in compile_example(path, "cubin", arch):
        assert c.artifacts["cubin"].data[:4] == b"\x7fELF"
        assert "registers" in c.resources


@needs_toolchain
@pytest.mark.parametrize("path", GEMMS, ids=lambda p: p.stem)
def test_the_example_gemms_do_not_spill(path):
    for c in compile_example(path, "cubin"):
        assert c.resources.get("spill_stores") == 0 and c.resources.get("spill_loads") == 0, c.resources
        assert c.resources.get("stack_bytes") == 0, c.resources


@needs_toolchain
def test_sass_of_the_mma_gemm_has_tensor_core_and_ldmatrix_instructions():
    (c,) = compile_example(EXAMPLES / "gemm_mma_ldmatrix.ave", "sass")
    sass = c.artifacts["sass"].text
    assert "HMMA.16816.F32.BF16" in sass
    assert "LDSM.16.M88.4" in sass and "LDSM.16.MT88.2" in sass
    assert "BAR.SYNC" in sass


@needs_toolchain
def test_sass_of_a_vector_copy_has_ldgsts():
    sass = compile_text(vector_copy_kernel(), "sass").artifacts["sass"].text
    assert "LDGSTS.E.BYPASS.128" in sass and "LDGDEPBAR" in sass


def test_an_amd_kernel_is_refused_with_the_reason():
    from ave_decl.codegen import CodegenError

    with pytest.raises(CodegenError, match="imports mfma_f32_32x32x8_bf16 .amdgpu.; target nvptx compiles nvidia"):
        compile_example(EXAMPLES / "gemm_lds_mfma.ave", "ptx")


def test_a_wave64_lane_kernel_is_refused():
    from ave_decl.codegen import CodegenError

    text = (EXAMPLES / "untagged_operand.ave").read_text()
    text = text.replace("t = thread_id(0)", "t = lane_id()") if "t = thread_id(0)" in text else text + ""
    module = parse_text(text, "k.ave")
    if nvptx.applies(module.kernels[0], resolve_imports(module)) is None:
        pytest.skip("untagged_operand.ave uses no lane construct to rewrite")
    with pytest.raises(CodegenError, match="64-lane"):
        compile_text(text, "ptx")


def test_run_on_a_gpu_or_the_documented_refusal(ave):
    problem = nvptx.device_available()
    r = ave("run", EXAMPLES / "gemm_mma_ldmatrix.ave", "--target", "nvptx", "--sizes", "M=64,N=32,K=32")
    if problem is not None:
        assert r.code == 2 and "cannot run on target nvptx" in r.err and len(r.err.strip().splitlines()) == 1, r
    else:  # a GPU is here: the emitted kernel must match its reference
        assert r.code == 0 and r.out.startswith("ok"), r.out + r.err
    assert SIZES["gemm_mma_ldmatrix"]
