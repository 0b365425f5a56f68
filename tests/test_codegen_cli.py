"""`ave emit` and `ave run`: the gate on VERIFIED, outputs, files, and one-line errors with exit codes."""
from __future__ import annotations

import json

import pytest
from codegen_support import EXAMPLES

import ave_decl

MMA = EXAMPLES / "gemm_mma_ldmatrix.ave"
WRONG = EXAMPLES / "gemm_lds_mfma_transposed.ave"


def test_emit_prints_ptx_of_a_verified_kernel(ave):
    r = ave("emit", MMA, "--target", "nvptx")
    assert r.code == 0 and ".target sm_90a" in r.out and "mma.sync.aligned.m16n8k16" in r.out


def test_emit_refuses_a_kernel_with_a_violation_and_says_why(ave):
    r = ave("emit", WRONG, "--target", "host")
    assert r.code == 1 and r.out == ""
    first = r.err.splitlines()[0]
    assert first.startswith(f"{WRONG}:7:1: error: refusing to compile gemm_lds_mfma_transposed: the verifier says "
                            "VIOLATION (ave/mma-k-pairing at line 32)"), r.err
    r = ave("emit", WRONG, "--target", "host", "--unverified")
    assert r.code == 0 and "define void @gemm_lds_mfma_transposed" in r.out


def test_emit_writes_binary_stages_to_a_file(ave, tmp_path):
    r = ave("emit", MMA, "--target", "nvptx", "--stage", "cubin")
    assert r.code == 2 and r.err.strip() == "error: stage cubin is binary: give -o FILE"  # before compiling
    out = tmp_path / "k.cubin"
    r = ave("emit", MMA, "--target", "nvptx", "--arch", "sm_80", "--stage", "cubin", "-o", out)
    assert r.code == 0 and out.read_bytes()[:4] == b"\x7fELF"
    assert "gemm_mma_ldmatrix: nvptx sm_80:" in r.err and "0 bytes spill stores" in r.err


@pytest.mark.parametrize("args, code, message", [
    (["--target", "nope"], 2, "no backend named nope (installed: amdgpu, host, nvptx"),
    (["--target", "nvptx", "--arch", "sm_70"], 2, "target nvptx accepts --arch sm_90a, sm_80 (not sm_70)"),
    (["--target", "nvptx", "--stage", "hsaco"], 2, "target nvptx has stages llir, ptx, cubin, sass (not hsaco)"),
    (["--target", "nvptx", "--kernel", "nope"], 2, "has no kernel named 'nope'"),
])
def test_emit_usage_errors_are_one_line(ave, args, code, message):
    r = ave("emit", MMA, *args)
    assert r.code == code and message in r.err and "Traceback" not in r.err, r.err


def test_emit_refuses_an_amd_kernel_for_nvptx_with_exit_6(ave):
    r = ave("emit", EXAMPLES / "gemm_lds_mfma.ave", "--target", "nvptx")
    assert r.code == 6 and "gemm_lds_mfma.ave:6:1: error: gemm_lds_mfma imports mfma_f32_32x32x8_bf16" in r.err


def test_run_on_the_host_prints_the_error_and_exits_0(ave):
    r = ave("run", EXAMPLES / "gemm_naive.ave", "--sizes", "M=32,N=16,K=8")
    assert r.code == 0, r.out + r.err
    assert r.out.startswith("ok        gemm_naive on host at M=32, K=8, N=16 (verifier: VERIFIED)")
    assert "reference C: max abs error" in r.out


def test_run_exits_1_when_the_output_differs(ave):
    r = ave("run", WRONG, "--sizes", "M=64,N=64,K=64", "--unverified", "--json")
    assert r.code == 1
    (run,) = json.loads(r.out)["runs"]
    assert run["ok"] is False and run["comparison"]["mismatched"] > 0 and run["verdict"] == "unchecked"


@pytest.mark.parametrize("sizes", ["M=1,N=1,K=64", "M=33,N=33,K=64"])
def test_an_out_of_bounds_store_under_unverified_is_a_located_fault_not_a_crash(ave, sizes):
    """The host target checks every access: the tail kernel's unmasked store used to corrupt the
    heap of the ave process itself (a segfault or a glibc abort)."""
    bug = EXAMPLES / "tails" / "gemm_tail_unmasked_store.ave"
    r = ave("run", bug, "--unverified", "--sizes", sizes)
    line = next(i + 1 for i, ln in enumerate(bug.read_text().splitlines()) if "C[row, col] = acc[r]" in ln)
    assert r.code == 1 and r.err.startswith(f"{bug}:{line}:9: error: out-of-bounds store to C: the host target "
                                            "checks every access"), r.err
    r = ave("run", EXAMPLES / "tails" / "gemm_tail.ave", "--unverified", "--sizes", sizes)
    assert r.code == 0 and r.out.startswith("ok "), r.out + r.err


def test_run_rejects_sizes_the_kernel_does_not_admit(ave):
    r = ave("run", EXAMPLES / "gemm_naive.ave", "--sizes", "M=17,N=16,K=8")
    assert r.code == 3 and "the sizes violate assume(...)" in r.err


def test_python_api_emit_and_run():
    (compiled,) = ave_decl.emit(MMA, target="nvptx", stage="llir")
    assert list(compiled.artifacts) == ["llir"] and compiled.signature.sizes == ("M", "K", "N")
    (run,) = ave_decl.run(EXAMPLES / "gemm_naive.ave", sizes={"M": 16, "N": 16, "K": 4})
    assert run.ok and run.comparison["rel"] < 1e-5
    with pytest.raises(ave_decl.execute.NotVerified) as err:
        ave_decl.emit(WRONG, target="host")
    assert err.value.exit_code == 1


def test_a_missing_ptxas_is_one_line_and_exit_2(ave, tmp_path, monkeypatch):
    monkeypatch.setenv("AVE_PTXAS", str(tmp_path / "no-ptxas"))
    r = ave("emit", MMA, "--target", "nvptx", "--stage", "cubin", "-o", tmp_path / "k.cubin")
    assert r.code == 2 and not (tmp_path / "k.cubin").exists()
    assert r.err.strip().endswith("error: AVE_PTXAS=" + str(tmp_path / "no-ptxas") + " is not a file"), r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_backend_without_lane_operations_says_so():
    """A plug-in with `groups = ()` (docs/backends.md's example) refuses a lane kernel in words
    (it said "runs -lane ones")."""
    from ave_decl.codegen.backend import Backend
    from ave_decl.lang.parser import parse_source
    from ave_decl.lang.resolve import resolve_imports
    from ave_decl.lang.source import SourceFile

    class NoLanes(Backend):
        name = "nolanes"
        groups = ()

    module = parse_source(SourceFile.read(EXAMPLES / "lanes" / "lane_exchange.ave"))
    why = NoLanes().applies(module.kernels[0], resolve_imports(module))
    assert why is not None and why.endswith("target nolanes has no warp/wave operations"), why
