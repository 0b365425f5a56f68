"""The launch limits of the two targets a kernel can declare (docs/language.md, "Limits").

A kernel's `wave=` declares the AMD target (gfx942, MI300X), `warp=` the NVIDIA one (sm_90,
H100/H200); imports from `ave.amdgpu` / `ave.nvidia` are checked against the same choice by the
instruction lowering. Figures, from ../shared/reference/instructions-and-layouts.md §5 and the
vendors' programming guides:

* threads per block: 1024 on both; block extents 1024 x 1024 x 1024 (HIP) and
  1024 x 1024 x 64 (CUDA compute capability 9.0);
* grid extents: 2**31 - 1 in every dimension (HIP) and 2**31 - 1 x 65535 x 65535 (CUDA);
* shared memory per block: gfx942 LDS 64 KiB per workgroup; on sm_90 a block may use up to
  227 KiB only through *dynamic* shared memory with an opt-in attribute, while statically
  declared `__shared__` arrays, which is what `shared(...)` lowers to (a module global in
  addrspace(3), ../shared/reference/backends-toolchain.md), are limited to 48 KiB.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    group: str  # "wave" | "warp"
    max_threads: int
    max_block: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    shared_bytes: int


GFX942 = Target("AMD gfx942 (MI300X)", "wave", 1024, (1024, 1024, 1024), (2**31 - 1,) * 3, 64 * 1024)
SM90 = Target("NVIDIA sm_90 (H100/H200)", "warp", 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 48 * 1024)

TARGETS = {"wave": GFX942, "warp": SM90}
