"""Shared helpers of the code-generation tests: example sizes, compiling and running on a backend."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ave_decl.codegen import Backend, get_backend
from ave_decl.execute import launch_kernel
from ave_decl.lang.parser import parse_source
from ave_decl.lang.resolve import resolve_imports
from ave_decl.lang.source import SourceFile
from ave_decl.sim.reference import compare, evaluate_reference, reference_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Small sizes at which every example runs on the host target (each meets the kernel's assume(...)).
SIZES = {
    "gemm_naive": {"M": 32, "N": 32, "K": 24},
    "gemm_mma_ldmatrix": {"M": 64, "N": 32, "K": 32},
    "gemm_mma_pipelined": {"M": 128, "N": 128, "K": 96},
    "gemm_mfma_mi300x": {"M": 256, "N": 128, "K": 96},
    "gemm_lds_mfma": {"M": 64, "N": 128, "K": 64},
    "gemm_lds_mfma_transposed": {"M": 64, "N": 64, "K": 64},
    "gemm_lds_swizzled": {"M": 64, "N": 64, "K": 128},
    "gemm_mfma16": {"M": 64, "N": 64, "K": 64},
    "gemm_pipelined": {"M": 64, "N": 64, "K": 128},
    "flash_attention_gqa": {"S": 64, "H": 4, "HKV": 1},
    "fused_moe": {"T": 32, "E": 2, "EM": 64, "EB": 2, "N": 64},
    "exchange_untagged": {"N": 128},
}
EXPECTED_WRONG = {"gemm_lds_mfma_transposed"}  # the example with a deliberate bug (ave check: VIOLATION)


def kernels_of(path: Path):
    src = SourceFile(str(path), path.read_text())
    module = parse_source(src)
    return src, module, resolve_imports(module)


def run_on(backend: Backend | str, text_or_path, sizes: dict[str, int], seed: int = 0, stage: str | None = None,
           barriers_proven: bool = False):
    """(comparison with the reference or None, inputs, outputs) of the file's first kernel;
    `barriers_proven` as the verifier's ave/barrier-divergence would say (Backend.compile)."""
    backend = get_backend(backend) if isinstance(backend, str) else backend
    path = Path(text_or_path) if isinstance(text_or_path, Path) else None
    src = SourceFile(str(path) if path else "t.ave", path.read_text() if path else text_or_path)
    module = parse_source(src)
    k = module.kernels[0]
    compiled = backend.compile(k, resolve_imports(module), None, stage, barriers_proven)
    inputs, outputs, _ = launch_kernel(backend, compiled, k, sizes, seed)
    ref = reference_of(k)
    result = compare(outputs[ref.output], evaluate_reference(ref, inputs, sizes), ref.tolerance) if ref else None
    return result, inputs, outputs


def max_rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))
