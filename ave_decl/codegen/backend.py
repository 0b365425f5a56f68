"""The backend plug-in interface and the registry of installed backends (entry points).

A backend is an object with a name, the architectures it accepts, its ordered compile stages
(`llir -> ptx -> cubin -> sass` for nvptx) and a hash of its options for caching; it supplies
target hooks (target.py) to the shared lowering, runs its stages, and may launch the result.
Third-party backends register under the entry-point group `ave.backends` (docs/backends.md),
as Triton's do under `triton.backends`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ..hw.instructions import Instruction, LoadMatrix
from ..lang import ast as A
from ..lang.errors import UsageError
from .abi import KernelSignature, signature, uses_group
from .errors import CodegenError, NoDevice
from .lower import lower_kernel
from .target import CodegenTarget, LoweredKernel


@dataclass(frozen=True)
class Artifact:
    stage: str
    data: str | bytes
    suffix: str  # file suffix when written with `ave emit -o`

    @property
    def text(self) -> str:
        return self.data if isinstance(self.data, str) else self.data.hex()


@dataclass
class CompiledKernel:
    name: str
    backend: str
    arch: str
    signature: KernelSignature
    info: LoweredKernel
    module: ir.Module  # the lowered (unoptimised) module, for launchers that add to it
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)  # registers, shared bytes, spills...
    handle: object = None  # what the backend's launcher keeps (a JIT engine, a loaded module)


class Backend:
    """Base class of backends; subclasses set the class attributes and implement target/build."""

    name = ""
    version = "0"
    archs: tuple[str, ...] = ()
    default_arch = ""
    stages: tuple[str, ...] = ("llir",)
    default_stage = "llir"  # what `ave emit` prints without --stage
    launch_stage: str | None = None  # the stage a launch needs (None: default_stage)
    binary_stages: frozenset[str] = frozenset()  # stages whose output is bytes (`ave emit` needs -o)
    vendor: str | None = None  # instructions of this vendor only (None: any)
    groups: tuple[int, ...] = (32, 64)  # warp/wave sizes the target executes

    def options_hash(self, arch: str, options: dict | None = None) -> str:
        """Identifies compiled output across processes: backend, its version, arch, options."""
        key = json.dumps([self.name, self.version, arch, sorted((options or {}).items())])
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def target(self, arch: str) -> CodegenTarget:
        raise NotImplementedError

    def build(self, compiled: CompiledKernel, upto: str) -> None:
        """Run the stages in order up to `upto`, adding one Artifact per stage."""
        raise NotImplementedError

    @staticmethod
    def optimised_llir(compiled: CompiledKernel, tm: llvm.TargetMachine) -> llvm.ModuleRef:
        """The lowered module parsed, verified and run through O3 for `tm`, recorded as the
        `llir` artifact: the first stage of every backend."""
        from .llvm import optimise, parse

        mod = optimise(parse(str(compiled.module)), tm)
        compiled.artifacts["llir"] = Artifact("llir", str(mod), ".ll")
        return mod

    def prepare(self, compiled: CompiledKernel) -> None:
        """Make `compiled` ready to launch (JIT, module load) so a launch times only the run."""

    def launch(self, compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
        """Run the whole grid on arrays in storage form; the tensors after the run."""
        raise NoDevice(f"backend {self.name} cannot launch kernels")

    def resource_summary(self, compiled: CompiledKernel) -> str:
        """One line of the compiled kernel's resources for `ave emit` (empty: none measured)."""
        r = compiled.resources
        if not r:
            return ""
        return (f"{r.get('registers', '?')} registers, {r.get('shared_bytes', 0)} bytes shared, "
                f"{r.get('spill_stores', 0)} bytes spill stores, {r.get('spill_loads', 0)} bytes spill loads")

    def device_available(self) -> str | None:
        """None if `launch` can run here, else the reason it cannot."""
        return f"backend {self.name} cannot launch kernels"

    # ----------------------------------------------------------- shared
    def applies(self, kernel: A.Kernel, imports: dict) -> str | None:
        """Why this backend cannot compile the kernel (None: it can)."""
        for name, instr in imports.items():
            vendor = instr.vendor if isinstance(instr, Instruction) else "nvidia" if isinstance(instr, LoadMatrix) else None
            if self.vendor is not None and vendor is not None and vendor != self.vendor:
                return f"{kernel.name} imports {name} ({vendor}); target {self.name} compiles {self.vendor} kernels"
        sig = signature(kernel)
        construct = uses_group(kernel, imports)
        if construct is not None and sig.group not in self.groups:
            runs = (f"runs {' or '.join(map(str, self.groups))}-lane ones" if self.groups
                    else "has no warp/wave operations")
            return (f"{kernel.name} declares {sig.group}-lane warps/waves and uses {construct.func_name}(); target "
                    f"{self.name} {runs}")
        return None

    def check_arch(self, arch: str | None) -> str:
        arch = arch or self.default_arch
        if self.archs and arch not in self.archs:
            raise UsageError(f"target {self.name} accepts --arch {', '.join(self.archs)} (not {arch})")
        return arch

    def compile(self, kernel: A.Kernel, imports: dict, arch: str | None = None, stage: str | None = None,
                barriers_proven: bool = False) -> CompiledKernel:
        """`barriers_proven`: the verifier proved ave/barrier-divergence for the kernel (its
        wave-specialized arms reach the same barriers), so those barriers may be compiled."""
        arch = self.check_arch(arch)
        stage = stage or self.default_stage
        if stage not in self.stages:
            raise UsageError(f"target {self.name} has stages {', '.join(self.stages)} (not {stage})")
        reason = self.applies(kernel, imports)
        if reason is not None:
            raise CodegenError(reason, kernel.decorator.span)
        module, info = lower_kernel(kernel, imports, self.target(arch), barriers_proven)
        compiled = CompiledKernel(kernel.name, self.name, arch, signature(kernel), info, module)
        self.build(compiled, stage)
        return compiled
