"""The `amdgpu` backend: stages llir -> asm (LLVM's AMDGPU back end, gfx942) -> obj (relocatable
ELF) -> hsaco (a code object, linked by ld.lld when one is installed)."""
from __future__ import annotations

import numpy as np

from ave_decl.codegen import Artifact, Backend, CompiledKernel
from ave_decl.codegen.llvm import parse

from . import toolchain
from .resources import resources_of
from .target import ARCHS, AmdgpuTarget, machine


class AmdgpuBackend(Backend):
    name = "amdgpu"
    version = "1"
    archs = ARCHS
    default_arch = "gfx942"
    stages = ("llir", "asm", "obj", "hsaco")
    default_stage = "asm"
    binary_stages = frozenset(("obj", "hsaco"))
    launch_stage = "hsaco"
    vendor = "amdgpu"
    groups = (64,)  # CDNA runs wave64 only

    def target(self, arch: str) -> AmdgpuTarget:
        return AmdgpuTarget(arch)

    def build(self, compiled: CompiledKernel, upto: str) -> None:
        tm = machine(compiled.arch)
        mod = self.optimised_llir(compiled, tm)
        if upto == "llir":
            return
        asm = tm.emit_assembly(mod)
        compiled.artifacts["asm"] = Artifact("asm", asm, ".s")
        compiled.resources.update(resources_of(asm, compiled.name, compiled.info.threads))
        if upto == "asm":
            return
        # LLVM's code generation rewrites the module in place (the structurizer inserts
        # llvm.amdgcn.if/else, which a second code generation cannot select): emit the object
        # from a fresh copy of the optimised IR
        obj = tm.emit_object(parse(compiled.artifacts["llir"].text))
        compiled.artifacts["obj"] = Artifact("obj", obj, ".o")
        if upto == "obj":
            return
        hsaco = toolchain.link(obj)
        compiled.artifacts["hsaco"] = Artifact("hsaco", hsaco, ".hsaco")
        compiled.resources["code_object"] = toolchain.code_object_target(hsaco)

    def resource_summary(self, compiled: CompiledKernel) -> str:
        r = compiled.resources
        if not r:
            return ""
        line = (f"{r.get('vgprs', '?')} VGPRs, {r.get('agprs', 0)} AGPRs, {r.get('sgprs', '?')} SGPRs, "
                f"{r.get('shared_bytes', 0)} bytes LDS, {r.get('scratch_bytes', 0)} bytes scratch, "
                f"{r.get('vgpr_spills', 0)} VGPR / {r.get('sgpr_spills', 0)} SGPR spills")
        if "occupancy_waves_per_simd" in r:
            line += f", occupancy {r['occupancy_waves_per_simd']} waves/SIMD on MI300X ({r['occupancy_limit']}-limited)"
        if "code_object" in r:
            line += f"; code object for {r['code_object']}"
        return line

    def device_available(self) -> str | None:
        from .launch import device_problem

        return device_problem()

    def launch(self, compiled: CompiledKernel, arrays: dict[str, np.ndarray],
               sizes: dict[str, int]) -> dict[str, np.ndarray]:
        from .launch import launch

        return launch(compiled, arrays, sizes)


backend = AmdgpuBackend()
