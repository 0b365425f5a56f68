"""The built-in `host` backend: stages `llir -> asm` for this CPU, and a launcher (JIT + pthreads)."""
from __future__ import annotations

import numpy as np

from .backend import Artifact, Backend, CompiledKernel
from .host import HostTarget, host_machine


class HostBackend(Backend):
    name = "host"
    version = "1"
    archs = ("native",)
    default_arch = "native"
    stages = ("llir", "asm")
    vendor = None  # emulates every vendor's warp/wave instructions
    groups = (32, 64)

    def target(self, arch: str) -> HostTarget:
        return HostTarget()

    def build(self, compiled: CompiledKernel, upto: str) -> None:
        mod = self.optimised_llir(compiled, host_machine())
        if upto == "asm":
            compiled.artifacts["asm"] = Artifact("asm", host_machine().emit_assembly(mod), ".s")

    def device_available(self) -> str | None:
        return None

    def prepare(self, compiled: CompiledKernel) -> None:
        from .host_launch import jit

        if compiled.handle is None:
            fn = compiled.module.globals[compiled.name]
            compiled.handle = jit(compiled.module, compiled.signature, compiled.info, fn)

    def launch(self, compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        self.prepare(compiled)
        return compiled.handle.run(arrays, sizes)  # type: ignore[attr-defined]
