"""Occupancy for the performance model: how many of a CU's (SM's) thread slots a kernel keeps
resident, from its registers per thread and shared memory per block.

Why: a kernel with too few resident waves cannot hide memory latency, so its memory time is
longer than bytes over bandwidth says. The figures come from the target's backend when it can
compile the kernel here (`ave_decl.emit`: the amdgpu backend reads LLVM's register counts, the
nvptx one `ptxas -v`); otherwise they are estimated from the kernel's text (its `shared(...)`
buffers and `local(...)` arrays), a lower bound on registers (docs/planner.md, blind spots).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ave_decl.lang import ast as A
from ave_decl.transform.ast_rewrite import walk

_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "fp8": 1, "bf8": 1, "i32": 4, "int32": 4, "i8": 1, "u8": 1, "i16": 2}
BASE_REGISTERS = 16  # ids, addresses and loop counters a kernel holds beside its arrays (the estimate's floor)


@dataclass(frozen=True)
class Resources:
    registers: int  # 32-bit registers per thread
    shared_bytes: int  # per block
    source: str  # "amdgpu backend", "nvptx backend" or "estimate"


@dataclass(frozen=True)
class Occupancy:
    fraction: float  # resident threads over the unit's thread slots
    blocks: int  # resident blocks per unit
    limit: str  # threads, blocks, registers, shared or grid
    resources: Resources

    def to_json(self) -> dict:
        return {"fraction": self.fraction, "blocks_per_unit": self.blocks, "limit": self.limit,
                "registers": self.resources.registers, "shared_bytes": self.resources.shared_bytes,
                "source": self.resources.source}


def estimated(kernel: A.Kernel) -> Resources:
    """Shared bytes of every `shared(...)`; registers: every `local(...)` array (packed 32-bit
    words) plus one per scalar the kernel assigns, plus BASE_REGISTERS."""
    shared, words, scalars = 0, 0, set()
    for s in walk(kernel.body):
        if not isinstance(s, A.Assign) or not isinstance(s.target, A.Name):
            continue
        call = s.value if isinstance(s.value, A.Call) else None
        if call is not None and call.func_name in ("shared", "local") and len(call.args) >= 2:
            dims = call.args[-1].elts if isinstance(call.args[-1], A.Tuple) else (call.args[-1],)
            if not all(isinstance(d, A.Int) for d in dims):
                continue
            size = math.prod(d.value for d in dims) * _BYTES.get(getattr(call.args[0], "id", "f32"), 4)
            if call.func_name == "shared":
                shared += size
            else:
                words += -(-size // 4)
        else:
            scalars.add(s.target.id)
    return Resources(words + len(scalars) + BASE_REGISTERS, shared, "estimate")


@lru_cache(maxsize=64)
def from_backend(text: str, target: str) -> Resources | None:
    """The backend's report for the (first) kernel, or None where it cannot compile here (no
    toolchain, a construct of another target)."""
    import ave_decl
    from ave_decl.lang.errors import AveError

    try:
        (c, *_) = ave_decl.emit(text, target=target, stage="asm" if target == "amdgpu" else "cubin",
                                unverified=True, path="<model>.ave")
    except (AveError, OSError, ValueError):
        return None
    r = c.resources
    registers = r.get("total_vgprs", r.get("registers"))
    if registers is None:
        return None
    return Resources(int(registers), int(r.get("shared_bytes", 0)), f"{target} backend")


def occupancy(res: Resources, threads: int, dev: dict, grid_blocks: int | None = None) -> Occupancy:
    """Resident blocks per unit under the device's limits (devices.toml: thread slots, blocks,
    registers and shared memory per unit, the register allocation granule), and at most
    `grid_blocks` (the launch's blocks per unit: a small grid cannot fill a unit)."""
    granule = dev["register_granule"]
    regs = max(granule, -(-res.registers // granule) * granule)
    limits = {"threads": dev["threads_per_unit"] // threads, "blocks": dev["blocks_per_unit"],
              "registers": dev["registers_per_unit"] // (regs * threads)}
    if grid_blocks is not None:
        limits["grid"] = grid_blocks
    if res.shared_bytes:
        limits["shared"] = dev["shared_per_unit"] // res.shared_bytes
    limit = min(limits, key=limits.__getitem__)
    blocks = max(0, limits[limit])
    return Occupancy(blocks * threads / dev["threads_per_unit"], blocks, limit, res)


def latency_factor(occ: Occupancy, pipelined: bool, dev: dict) -> float:
    """How much longer memory takes than bytes over bandwidth: 1 at or above the occupancy the
    device needs to keep enough requests in flight (less with an async-copy pipeline, which
    keeps its own in flight), inversely proportional below it."""
    need = dev["occupancy_for_bandwidth"] / (2 if pipelined else 1)
    return max(1.0, need / max(occ.fraction, 1e-9))


def kernel_resources(text: str, kernel: A.Kernel, target: str | None) -> Resources:
    if target in ("amdgpu", "nvptx"):
        found = from_backend(text, target)
        if found is not None:
            return found
    return estimated(kernel)
