"""llvmlite set-up and the optimisation pipeline every target runs on the lowered module."""
from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm


@lru_cache(maxsize=None)
def initialise() -> None:
    """Register every target LLVM was built with (NVPTX, AMDGPU, the host); once per process."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def parse(ir_text: str) -> llvm.ModuleRef:
    """Parse and verify textual IR (the lowering's output must always verify)."""
    initialise()
    module = llvm.parse_assembly(ir_text)
    module.verify()
    return module


def optimise(module: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> llvm.ModuleRef:
    """LLVM's default O`level` pipeline for this target machine: SROA turns the register arrays
    into registers, instcombine folds the layout arithmetic, the target's own passes run too."""
    initialise()
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(module, pb)
    return module
