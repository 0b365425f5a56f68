"""The resource report of a gfx942 kernel, read from the assembly LLVM emits (`.amdhsa_*`
directives, `.set <kernel>.num_*` symbols, the code-object metadata), and an occupancy estimate
for MI300X from the CDNA3 limits below."""
from __future__ import annotations

import re

# CDNA3 (MI300X) per compute unit: 4 SIMDs; per SIMD at most 8 waves, 512 unified VGPR/AGPR
# registers per lane (allocated in granules of 8), 800 SGPRs (granules of 16); 64 KiB LDS per CU.
SIMDS_PER_CU = 4
WAVES_PER_SIMD = 8
VGPRS_PER_SIMD = 512
VGPR_GRANULE = 8
SGPRS_PER_SIMD = 800
SGPR_GRANULE = 16
LDS_PER_CU = 65536
WAVE = 64


def _field(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text, re.MULTILINE)
    return int(m.group(1)) if m else None


def _align(x: int, granule: int) -> int:
    return -(-x // granule) * granule


def occupancy(total_vgprs: int, sgprs: int, lds_bytes: int, threads: int) -> tuple[int, str]:
    """Waves per SIMD a kernel can keep resident on MI300X and the resource that limits it."""
    waves_per_group = max(1, -(-threads // WAVE))
    limits = {"waves": WAVES_PER_SIMD,
              "VGPRs": VGPRS_PER_SIMD // max(VGPR_GRANULE, _align(total_vgprs, VGPR_GRANULE)),
              "SGPRs": SGPRS_PER_SIMD // max(SGPR_GRANULE, _align(sgprs, SGPR_GRANULE))}
    if lds_bytes:
        groups = LDS_PER_CU // lds_bytes
        limits["LDS"] = groups * waves_per_group // SIMDS_PER_CU
    # whole workgroups only: a CU holds as many groups as fit in its wave slots
    per_simd = min(limits.values())
    groups = per_simd * SIMDS_PER_CU // waves_per_group
    resident = groups * waves_per_group // SIMDS_PER_CU
    limiter = min(limits, key=limits.__getitem__)  # on a tie the first: the hardware's wave limit
    return resident, limiter


def resources_of(asm: str, kernel: str, threads: int) -> dict[str, int | str]:
    """Registers, LDS, scratch and spills of `kernel` in `asm`, with the MI300X occupancy estimate."""
    name = re.escape(kernel)
    block = re.search(rf"^\s*\.amdhsa_kernel {name}\n(.*?)^\s*\.end_amdhsa_kernel", asm, re.MULTILINE | re.DOTALL)
    directives = block.group(1) if block else ""
    out: dict[str, int | str] = {}
    for key, pattern in (
        ("vgprs", rf"^\s*\.set {name}\.num_vgpr, (\d+)"),
        ("agprs", rf"^\s*\.set {name}\.num_agpr, (\d+)"),
        ("sgprs", r"^\s*\.sgpr_count:\s+(\d+)"),
        ("vgpr_spills", r"^\s*\.vgpr_spill_count:\s+(\d+)"),
        ("sgpr_spills", r"^\s*\.sgpr_spill_count:\s+(\d+)"),
    ):
        value = _field(asm, pattern)
        if value is not None:
            out[key] = value
    for key, pattern in (("total_vgprs", r"\.amdhsa_next_free_vgpr (\d+)"),
                         ("shared_bytes", r"\.amdhsa_group_segment_fixed_size (\d+)"),
                         ("scratch_bytes", r"\.amdhsa_private_segment_fixed_size (\d+)")):
        value = _field(directives, pattern)
        if value is not None:
            out[key] = value
    if "total_vgprs" in out and "sgprs" in out:
        waves, limiter = occupancy(int(out["total_vgprs"]), int(out["sgprs"]), int(out.get("shared_bytes", 0)), threads)
        out["occupancy_waves_per_simd"] = waves
        out["occupancy_limit"] = limiter
    return out
