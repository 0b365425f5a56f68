"""Ave's `nvptx` backend plug-in: NVIDIA GPUs (sm_90a, sm_80) from the shared LLVM lowering.

Registered under the entry-point group `ave.backends` as `nvptx = ave_nvptx.backend:backend`.
Depends only on ave_decl's public code-generation API (ave_decl.codegen), never on the verifier.
"""
from __future__ import annotations

from .backend import NvptxBackend, backend

__all__ = ["NvptxBackend", "backend"]
