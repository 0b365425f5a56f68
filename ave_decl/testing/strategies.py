"""Hypothesis strategies for users who fuzz kernel transformations.

`gemm_kernels()` draws well-formed tile kernels of the shared-memory-staged GEMM family (and the
naive GEMM): random wave/warp arrangements (hence block tiles and launch shapes), K tiles (1-3 of
them), copy mappings (one contiguous chunk per thread, coalesced scalars, or vectors of 2-8
values), shared-memory layouts with and without bijective swizzles, the matrix instruction (AMD:
one 32x32x8 MFMA per wave tile, or 2x2 16x16x16 MFMAs; NVIDIA: mma.sync m16n8k16 per warp tile
fed by ldmatrix), each with sizes that satisfy its `assume(...)`. A drawn kernel is a
`KernelCase` (the parameters, the `.ave` text and the parsed module), and every field shrinks
toward the smallest kernel: one wave or warp, the smallest tile, row-major shared memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from ..lang import ast as A
from ..lang.parser import parse_text
from ..transform.gemm_templates import AttentionSpec, GemmSpec, render, valid_swizzles

__all__ = ["AttentionSpec", "GemmSpec", "KernelCase", "attention_kernels", "attention_specs", "gemm_kernels",
           "gemm_specs", "render"]


@dataclass(frozen=True)
class KernelCase:
    spec: GemmSpec | AttentionSpec
    text: str
    module: A.Module = field(compare=False, repr=False)

    @property
    def sizes(self) -> dict[str, int]:
        return self.spec.sizes


@st.composite
def gemm_specs(draw, naive: bool | None = None) -> GemmSpec:
    is_naive = draw(st.booleans()) if naive is None else naive
    if is_naive:
        return GemmSpec(naive=True, grid_m=draw(st.integers(1, 2)), grid_n=draw(st.integers(1, 2)),
                        k_tiles=draw(st.integers(1, 2)))
    wm, wn = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    instruction = draw(st.sampled_from(["32x32x8", "16x16x16", "m16n8k16"]))
    kt = draw(st.sampled_from([8, 16, 32] if instruction == "32x32x8" else [16, 32]))
    shape = GemmSpec(wm, wn, kt, instruction=instruction)
    if (shape.bm * kt) % shape.threads or (kt * shape.bn) % shape.threads:
        kt = 32  # every element of both tiles has exactly one copying thread
    per_thread = (shape.bm * kt // shape.threads, kt * shape.bn // shape.threads)
    widths = [v for v in (2, 4, 8) if all(n % v == 0 for n in (*per_thread, kt, shape.bn))]
    copy_width = draw(st.sampled_from([0, 1, *widths]))
    # ldmatrix reads 16 contiguous bytes per row address: the NVIDIA family stays row-major
    sw_a = None if shape.nvidia else draw(st.none() | st.sampled_from(valid_swizzles(shape.bm, kt) or [None]))
    sw_b = None if shape.nvidia else draw(st.none() | st.sampled_from(valid_swizzles(kt, shape.bn) or [None]))
    # up to 3 K tiles: a 3-stage pipeline's steady-state refill runs only from the third tile on
    return GemmSpec(wm, wn, kt, sw_a, sw_b, draw(st.integers(1, 2)), draw(st.integers(1, 2)),
                    draw(st.integers(1, 3)), instruction=instruction, copy_width=copy_width)


@st.composite
def attention_specs(draw) -> AttentionSpec:
    return AttentionSpec(group=draw(st.sampled_from([1, 2, 4])), causal=draw(st.booleans()),
                         heads_kv=draw(st.integers(1, 2)), kv_blocks=draw(st.integers(1, 2)))


def attention_kernels() -> st.SearchStrategy[KernelCase]:
    """Flash-attention kernels (the row-statistics, head-mapping and softmax invariants)."""
    return attention_specs().map(lambda spec: KernelCase(spec, render(spec), parse_text(render(spec), "fuzz.ave")))


def gemm_kernels(naive: bool | None = None) -> st.SearchStrategy[KernelCase]:
    """Well-formed kernels with the sizes to run them at."""
    return gemm_specs(naive).map(lambda spec: KernelCase(spec, render(spec), parse_text(render(spec), "fuzz.ave")))
