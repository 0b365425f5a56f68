"""Ave's `amdgpu` backend plug-in: AMD CDNA3 GPUs (gfx942, MI300X) from the shared LLVM lowering.

Registered under the entry-point group `ave.backends` as `amdgpu = ave_amdgpu.backend:backend`.
Depends only on ave_decl's public code-generation API (ave_decl.codegen), never on the verifier.
"""
from __future__ import annotations

from .backend import AmdgpuBackend, backend

__all__ = ["AmdgpuBackend", "backend"]
