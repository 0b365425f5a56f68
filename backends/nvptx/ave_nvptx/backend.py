"""The `nvptx` backend: stages llir -> ptx (LLVM's NVPTX back end) -> cubin (ptxas) -> sass (nvdisasm)."""
from __future__ import annotations

import numpy as np

from ave_decl.codegen import Artifact, Backend, CompiledKernel

from . import toolchain
from .target import ARCHS, NvptxTarget, machine


class NvptxBackend(Backend):
    name = "nvptx"
    version = "1"
    archs = ARCHS
    default_arch = "sm_90a"
    stages = ("llir", "ptx", "cubin", "sass")
    default_stage = "ptx"
    binary_stages = frozenset(("cubin",))
    vendor = "nvidia"
    groups = (32,)

    def target(self, arch: str) -> NvptxTarget:
        return NvptxTarget(arch)

    def build(self, compiled: CompiledKernel, upto: str) -> None:
        tm = machine(compiled.arch)
        mod = self.optimised_llir(compiled, tm)
        if upto == "llir":
            return
        ptx = tm.emit_assembly(mod)
        compiled.artifacts["ptx"] = Artifact("ptx", ptx, ".ptx")
        if upto == "ptx":
            return
        cubin, resources, report = toolchain.assemble(ptx, compiled.arch)
        compiled.artifacts["cubin"] = Artifact("cubin", cubin, ".cubin")
        compiled.resources.update(resources)
        compiled.info.notes.append(report.strip())
        if upto == "cubin":
            return
        compiled.artifacts["sass"] = Artifact("sass", toolchain.disassemble(cubin), ".sass")

    def device_available(self) -> str | None:
        from .launch import device_problem

        return device_problem()

    def launch(self, compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        from .launch import launch

        return launch(compiled, arrays, sizes)


backend = NvptxBackend()
