"""Hypothesis strategies for users who fuzz kernel transformations.

`gemm_kernels()` draws well-formed tile kernels of the LDS-staged MFMA GEMM family (and the naive
GEMM): random wave arrangements (hence block tiles and launch shapes), K tiles, copy mappings
(values per thread), shared-memory layouts with and without bijective swizzles, each with sizes
that satisfy its `assume(...)`. A drawn kernel is a `KernelCase` (the parameters, the `.ave` text
and the parsed module), and every field shrinks toward the smallest kernel: one wave, the
smallest tile, row-major shared memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from .. import ast as A
from ..layout import Composed, Swizzle, is_bijective, row_major
from ..parser import parse_text


@dataclass(frozen=True)
class GemmSpec:
    waves_m: int = 1
    waves_n: int = 1
    k_tile: int = 8
    swizzle_a: tuple[int, int, int] | None = None
    swizzle_b: tuple[int, int, int] | None = None
    grid_m: int = 1
    grid_n: int = 1
    k_tiles: int = 1
    naive: bool = False

    @property
    def bm(self) -> int:
        return 32 * self.waves_m

    @property
    def bn(self) -> int:
        return 32 * self.waves_n

    @property
    def threads(self) -> int:
        return 64 * self.waves_m * self.waves_n

    @property
    def sizes(self) -> dict[str, int]:
        if self.naive:
            return {"M": 16 * self.grid_m, "N": 16 * self.grid_n, "K": 8 * self.k_tiles}
        return {"M": self.bm * self.grid_m, "N": self.bn * self.grid_n, "K": self.k_tile * self.k_tiles}


@dataclass(frozen=True)
class KernelCase:
    spec: GemmSpec
    text: str
    module: A.Module = field(compare=False, repr=False)

    @property
    def sizes(self) -> dict[str, int]:
        return self.spec.sizes


def _layout(rows: int, cols: int, sw: tuple[int, int, int] | None) -> str:
    if sw is None:
        return ""
    return f", layout=swizzle({sw[0]}, {sw[1]}, {sw[2]}) @ row_major({rows}, {cols})"


def render(spec: GemmSpec) -> str:
    """The `.ave` text of a drawn kernel."""
    if spec.naive:
        return NAIVE
    bm, bn, kt, t = spec.bm, spec.bn, spec.k_tile, spec.threads
    ea, eb = bm * kt // t, kt * bn // t
    steps = kt // 8
    return f'''from ave.amdgpu import mfma_f32_32x32x8_bf16

@kernel(grid=(M // {bm}, N // {bn}), block={t}, wave=64, reference="C = A @ B")
def gemm_fuzz(A: Tensor[bf16, (M, K)], B: Tensor[bf16, (K, N)], C: Tensor[f32, (M, N)]):
    assume(M % {bm} == 0, N % {bn} == 0, K % {kt} == 0, K >= {kt})
    tag(A, lambda m, k: (m, k), "A")
    tag(B, lambda k, n: (k, n), "B")
    t = thread_id(0)
    w = wave_id()
    lane = lane_id()
    wm = w // {spec.waves_n}
    wn = w % {spec.waves_n}
    bm = block_id(0) * {bm}
    bn = block_id(1) * {bn}
    As = shared(bf16, ({bm}, {kt}){_layout(bm, kt, spec.swizzle_a)})
    Bs = shared(bf16, ({kt}, {bn}){_layout(kt, bn, spec.swizzle_b)})
    a = local(bf16, (4,))
    b = local(bf16, (4,))
    acc = local(f32, (16,), init=0)
    for kt in range(0, K, {kt}):
        for e in range({ea}):
            i = t * {ea} + e
            As[i // {kt}, i % {kt}] = A[bm + i // {kt}, kt + i % {kt}]
        for f in range({eb}):
            j = t * {eb} + f
            Bs[j // {bn}, j % {bn}] = B[kt + j // {bn}, bn + j % {bn}]
        syncthreads()
        for s in range({steps}):
            for v in range(4):
                a[v] = As[wm * 32 + lane % 32, s * 8 + (lane // 32) * 4 + v]
                b[v] = Bs[s * 8 + (lane // 32) * 4 + v, wn * 32 + lane % 32]
            acc = mfma_f32_32x32x8_bf16(a, b, acc)
        syncthreads()
    for r in range(16):
        C[bm + wm * 32 + 8 * (r // 4) + 4 * (lane // 32) + r % 4, bn + wn * 32 + lane % 32] = acc[r]
'''


NAIVE = '''@kernel(grid=(M // 16, N // 16), block=(16, 16), wave=64, reference="C = A @ B")
def gemm_naive_fuzz(A: Tensor[f32, (M, K)], B: Tensor[f32, (K, N)], C: Tensor[f32, (M, N)]):
    assume(M % 16 == 0, N % 16 == 0)
    tag(A, lambda m, k: (m, k), "A")
    tag(B, lambda k, n: (k, n), "B")
    m = block_id(0) * 16 + thread_id(1)
    n = block_id(1) * 16 + thread_id(0)
    acc = 0.0
    for k in range(K):
        x = A[m, k]
        y = B[k, n]
        assert_tag(x, y, lambda ta, tb: ta[1] == tb[0])
        acc += x * y
    C[m, n] = acc
'''


def valid_swizzles(rows: int, cols: int) -> list[tuple[int, int, int]]:
    """Swizzles that keep a rows x cols row-major buffer a bijection onto itself."""
    out = []
    for b in (1, 2, 3):
        for m in (0, 1, 2):
            for s in (2, 3, 4, 5, 6):
                if s < b:
                    continue
                layout = Composed(Swizzle(b, m, s), row_major(rows, cols))
                if b + m + s <= (rows * cols).bit_length() - 1 and is_bijective(layout, rows * cols):
                    out.append((b, m, s))
    return out


@st.composite
def gemm_specs(draw, naive: bool | None = None) -> GemmSpec:
    is_naive = draw(st.booleans()) if naive is None else naive
    if is_naive:
        return GemmSpec(naive=True, grid_m=draw(st.integers(1, 2)), grid_n=draw(st.integers(1, 2)),
                        k_tiles=draw(st.integers(1, 2)))
    wm, wn = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kt = draw(st.sampled_from([8, 16, 32]))
    threads = 64 * wm * wn
    if (32 * wm * kt) % threads or (kt * 32 * wn) % threads:
        kt = 32  # every element of both tiles has exactly one copying thread
    sw_a = draw(st.none() | st.sampled_from(valid_swizzles(32 * wm, kt) or [None]))
    sw_b = draw(st.none() | st.sampled_from(valid_swizzles(kt, 32 * wn) or [None]))
    return GemmSpec(wm, wn, kt, sw_a, sw_b, draw(st.integers(1, 2)), draw(st.integers(1, 2)),
                    draw(st.integers(1, 2)))


def gemm_kernels(naive: bool | None = None) -> st.SearchStrategy[KernelCase]:
    """Well-formed kernels with the sizes to run them at."""
    return gemm_specs(naive).map(lambda spec: KernelCase(spec, render(spec), parse_text(render(spec), "fuzz.ave")))
