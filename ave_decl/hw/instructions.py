"""Matrix-instruction library: operand (lane, value) -> (row, col) maps as data.

Each map is a pair of `.ave` index expressions over `lane` and `v` (the value slot in the
operand's register array). Sources: ../shared/reference/instructions-and-layouts.md §1.1-1.2
(AMD CDNA3 calculator closed forms) and §2.1 (PTX mma.m16n8k16 / CUTLASS SM80 traits).

Implied tag relations (numpy matmul convention, batch components first):
  * K pairing: for A slot (lA, vA) and B slot (lB, vB) of the same group with k_A == k_B,
    tag(A)[-1] == tag(B)[-2] (the last tag component of A is K, the one before last of B is K);
    tags of rank 1 use component 0.
  * Result: C slot (l, r) holding (i, j) carries tag(A at row i)[:-1] + (tag(B at col j)[-1],).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OperandMap:
    values: int  # register slots per lane
    row: str  # expression over lane, v
    col: str


@dataclass(frozen=True)
class Instruction:
    name: str
    vendor: str  # "amdgpu" | "nvidia"
    group: str  # "wave" | "warp"
    group_size: int
    m: int
    n: int
    k: int
    in_dtypes: tuple[str, ...]
    acc_dtype: str
    a: OperandMap  # rows = M index, cols = K index
    b: OperandMap  # rows = K index, cols = N index
    c: OperandMap  # rows = M index, cols = N index
    source: str


def _amd(name: str, m: int, k: int, dtypes: tuple[str, ...]) -> Instruction:
    kpl = k * m // 64
    if m == 32:
        c = OperandMap(16, "8 * (v // 4) + 4 * (lane // 32) + v % 4", "lane % 32")
    else:
        c = OperandMap(4, "4 * (lane // 16) + v", "lane % 16")
    return Instruction(
        name=name, vendor="amdgpu", group="wave", group_size=64, m=m, n=m, k=k,
        in_dtypes=dtypes, acc_dtype="f32",
        a=OperandMap(kpl, f"lane % {m}", f"{kpl} * (lane // {m}) + v"),
        b=OperandMap(kpl, f"{kpl} * (lane // {m}) + v", f"lane % {m}"),
        c=c,
        source="AMD matrix instruction calculator, CDNA3 (reference sheet §1.1-1.2)",
    )


_MMA_M16N8K16 = dict(
    vendor="nvidia", group="warp", group_size=32, m=16, n=8, k=16, acc_dtype="f32",
    a=OperandMap(8, "lane // 4 + 8 * ((v // 2) % 2)", "2 * (lane % 4) + v % 2 + 8 * (v // 4)"),
    b=OperandMap(4, "2 * (lane % 4) + v % 2 + 8 * (v // 2)", "lane // 4"),
    c=OperandMap(4, "lane // 4 + 8 * (v // 2)", "2 * (lane % 4) + v % 2"),
    source="PTX ISA mma.m16n8k16 fragments; CUTLASS SM80_16x8x16 traits (reference sheet §2.1)",
)

INSTRUCTIONS: dict[str, Instruction] = {
    i.name: i
    for i in (
        _amd("mfma_f32_32x32x8_bf16", 32, 8, ("bf16",)),
        _amd("mfma_f32_32x32x8_f16", 32, 8, ("f16",)),
        _amd("mfma_f32_16x16x16_bf16", 16, 16, ("bf16",)),
        _amd("mfma_f32_16x16x16_f16", 16, 16, ("f16",)),
        _amd("mfma_f32_16x16x32_fp8", 16, 32, ("fp8",)),
        _amd("mfma_f32_16x16x32_bf8", 16, 32, ("bf8",)),
        _amd("mfma_f32_32x32x16_fp8", 32, 16, ("fp8",)),
        Instruction(name="mma_m16n8k16_f16", in_dtypes=("f16",), **_MMA_M16N8K16),
        Instruction(name="mma_m16n8k16_bf16", in_dtypes=("bf16",), **_MMA_M16N8K16),
        Instruction(name="mma_m16n8k16", in_dtypes=("f16", "bf16"), **_MMA_M16N8K16),
    )
}

# Which import module offers which instructions.
MODULES: dict[str, str] = {"ave.amdgpu": "amdgpu", "ave.nvidia": "nvidia"}


# ------------------------------------------------------------------ data movement and Hopper
@dataclass(frozen=True)
class LoadMatrix:
    """`ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` (reference sheet §2.2).

    Thread `l` supplies the shared address of row `provider_row` of matrix `provider_matrix`
    (threads past `matrices * 8` are ignored); register `r` (matrix r), half `h` of thread `l`
    receives element (`row`, `col`) of the stored 8x8 matrix r.
    """

    name: str
    matrices: int
    trans: bool
    provider_matrix: str = "lane // 8"
    provider_row: str = "lane % 8"

    @property
    def row(self) -> str:
        return "2 * (lane % 4) + h" if self.trans else "lane // 4"

    @property
    def col(self) -> str:
        return "lane // 4" if self.trans else "2 * (lane % 4) + h"


LOAD_MATRIX: dict[str, LoadMatrix] = {
    m.name: m for m in (LoadMatrix(f"ldmatrix_x{n}{'_trans' if t else ''}", n, t) for n in (1, 2, 4)
                        for t in (False, True))
}


def wgmma_accumulator(n: int) -> OperandMap:
    """`wgmma.mma_async.m64nNk16` accumulator D over a warpgroup (128 threads; `lane` is the thread
    index in the warpgroup, 0..127): N/2 f32 values per thread (reference sheet §2.3;
    CUTLASS CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)))."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError("wgmma N must be a multiple of 8 in [8, 256]")
    return OperandMap(n // 2, "16 * (lane // 32) + (lane % 32) // 4 + 8 * ((v // 2) % 2)",
                      "8 * (v // 4) + 2 * (lane % 4) + v % 2")


WGMMA_A_REGISTERS = OperandMap(8, "16 * (lane // 32) + (lane % 32) // 4 + 8 * ((v // 2) % 2)",
                               "2 * (lane % 4) + v % 2 + 8 * (v // 4)")
"""wgmma A from registers (16-bit types), ALayout_64x16: each warp holds the m16n8k16 A fragment
of rows 16w..16w+15 (reference sheet §2.3)."""
