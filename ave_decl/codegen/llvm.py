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


def for_range(b, counter, count, body, label: str) -> None:
    """Emit `for i in range(count): body(i)` at `b` (i32, a real loop), counting in the stack
    slot `counter`; `b` ends positioned after the loop."""
    from llvmlite import ir

    i32 = ir.IntType(32)
    b.store(ir.Constant(i32, 0), counter)
    head, loop, done = (b.append_basic_block(f"{label}.{x}") for x in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.load(counter, typ=i32)
    b.cbranch(b.icmp_signed("<", i, count), loop, done)
    b.position_at_end(loop)
    body(i)
    b.store(b.add(i, ir.Constant(i32, 1)), counter)
    b.branch(head)
    b.position_at_end(done)
