"""Code generation: checked AST -> per-thread LLVM IR (llvmlite), shared by every target.

Owns the lowering (`lower.py` and its mixins), the target-hook interface (`target.py`) that a
backend implements, the kernel ABI (`abi.py`: parameter order, launch shape at given sizes),
the backend plug-in interface and registry (`backend.py`, entry-point group `ave.backends`) and
the built-in `host` target (`host.py`, `host_launch.py`), which runs the same IR on the CPU with
one OS thread per GPU thread. May import `hw` and `lang`; nothing here runs the verifier.
"""
from __future__ import annotations

from .abi import KernelSignature, TensorParam, signature
from .backend import Artifact, Backend, CompiledKernel
from .errors import CodegenError, LaunchFailed, NoDevice, ToolchainError
from .llvm import initialise, optimise
from .lower import lower_kernel
from .registry import get_backend, load_backends
from .target import CodegenTarget, LoweredKernel

__all__ = ["Artifact", "Backend", "CodegenError", "CodegenTarget", "CompiledKernel", "KernelSignature", "LaunchFailed",
           "LoweredKernel", "NoDevice", "TensorParam", "ToolchainError", "get_backend", "initialise", "load_backends", "lower_kernel",
           "optimise", "signature"]
