"""Kernel templates of the GEMM and attention families: a parameter record (`GemmSpec`,
`AttentionSpec`) and the `.ave` text it stands for (`render`). Why here and not in the test
tools: the fuzzer draws these records (`ave_decl.testing.strategies`), and the planner's
lowering step renders them (a technique that changes the kernel's structure, e.g. shared-memory
staging of a naive GEMM, is a change of record); neither needs the other, and this module imports
no Hypothesis.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..hw.layout import Composed, Swizzle, is_bijective, row_major

BF16_TOLERANCE = 1e-2  # f32 operands rounded to bf16 (8 significant bits): K-term sums stay well inside


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
    instruction: str = "32x32x8"  # "16x16x16": the wave's 32x32 tile as 2x2 MFMAs; "m16n8k16": NVIDIA;
    # "fma": no matrix instruction, each lane a 4x4 block of the wave's 32x32 tile in scalar FMAs
    copy_width: int = 0  # 0: one contiguous chunk per thread; 1: coalesced scalars; V: vectors of V
    pad: int = 0  # elements added to each row of both shared tiles (rows read by a column walk
    # then start in different banks); the tiles' indices are unchanged
    input_dtype: str = "bf16"  # of A and B in global memory; f32 inputs are rounded to bf16 in
    # shared memory for a matrix instruction (the kernel then declares BF16_TOLERANCE)
    name: str = "gemm_fuzz"
    split_k: int = 1  # 2: two groups of waves share each K tile, each multiplying half of its K
    # steps into its own accumulators; the second group's partial sums meet the first's through
    # shared memory in the epilogue (split-K within a block: the DSL has no atomics)

    @property
    def shared_dtype(self) -> str:
        return self.input_dtype if self.instruction == "fma" else "bf16"

    @property
    def tolerance(self) -> float | None:
        """The reference tolerance the kernel declares: None (the default 1e-3) unless its inputs
        are rounded to a narrower type on the way to the multiplier."""
        return BF16_TOLERANCE if self.shared_dtype == "bf16" and self.input_dtype == "f32" else None

    @property
    def nvidia(self) -> bool:
        """mma.sync m16n8k16 fed by ldmatrix: warps of 32 threads, each owning a 16x8 tile."""
        return self.instruction == "m16n8k16"

    @property
    def bm(self) -> int:
        return (16 if self.nvidia else 32) * self.waves_m

    @property
    def bn(self) -> int:
        return (8 if self.nvidia else 32) * self.waves_n

    @property
    def threads(self) -> int:
        return (32 if self.nvidia else 64) * self.waves_m * self.waves_n * self.split_k

    @property
    def sizes(self) -> dict[str, int]:
        if self.naive:
            return {"M": 16 * self.grid_m, "N": 16 * self.grid_n, "K": 8 * self.k_tiles}
        return {"M": self.bm * self.grid_m, "N": self.bn * self.grid_n, "K": self.k_tile * self.k_tiles}


@dataclass(frozen=True)
class AttentionSpec:
    """Grouped-query flash attention (online softmax, two MFMAs per KV block, P through shared
    memory): `group` query heads per KV head, optional causal mask, S = 32 * kv_blocks."""
    group: int = 1
    causal: bool = False
    heads_kv: int = 1
    kv_blocks: int = 1

    @property
    def sizes(self) -> dict[str, int]:
        return {"H": self.group * self.heads_kv, "HKV": self.heads_kv, "S": 32 * self.kv_blocks}


def _layout(rows: int, cols: int, sw: tuple[int, int, int] | None) -> str:
    if sw is None:
        return ""
    return f", layout=swizzle({sw[0]}, {sw[1]}, {sw[2]}) @ row_major({rows}, {cols})"


def copy_index(width: int, per_thread: int, threads: int, loop_var: str) -> str:
    """The element a thread copies at iteration `loop_var` of its copy loop (see GemmSpec.copy_width)."""
    if width == 0:
        return f"t * {per_thread} + {loop_var}"
    if width == 1:
        return f"{loop_var} * {threads} + t"
    return f"({loop_var} // {width} * {threads} + t) * {width} + {loop_var} % {width}"


def mfma32_compute(a_row: str, b_col: str, steps: int, indent: str) -> list[str]:
    """One 32x32x8 MFMA per K step of 8 on the wave tile at (a_row, b_col)."""
    k = "s * 8 + lane // 32 * 4 + v"
    return [f"{indent}for s in range({steps}):", f"{indent}    for v in range(4):",
            f"{indent}        a[v] = As[{a_row} + lane % 32, {k}]",
            f"{indent}        b[v] = Bs[{k}, {b_col} + lane % 32]",
            f"{indent}    acc = mfma_f32_32x32x8_bf16(a, b, acc)"]


def mfma16_compute(a_row: str, b_col: str, steps: int, indent: str) -> list[str]:
    """The same 32x32 wave tile as 2x2 16x16x16 MFMAs per K step of 16 (operands reused in a
    snake order: c00, c01, c11, c10)."""
    k = "s * 16 + lane // 16 * 4 + v"
    a = [f"{indent}    for v in range(4):", f"{indent}        a[v] = As[{a_row}{{}} + lane % 16, {k}]"]
    b = [f"{indent}    for v in range(4):", f"{indent}        b[v] = Bs[{k}, {b_col}{{}} + lane % 16]"]
    mfma = f"{indent}    c{{0}} = mfma_f32_16x16x16_bf16(a, b, c{{0}})"
    return ([f"{indent}for s in range({steps}):", a[0], a[1].format(""), b[1].format(""), mfma.format("00"),
             b[0], b[1].format(" + 16"), mfma.format("01"), a[0], a[1].format(" + 16"), mfma.format("11"),
             b[0], b[1].format(""), mfma.format("10")])


def mfma32_epilogue(row: str, col: str) -> list[str]:
    return ["    for r in range(16):",
            f"        C[{row} + 8 * (r // 4) + 4 * (lane // 32) + r % 4, {col} + lane % 32] = acc[r]"]


def mfma16_epilogue(row: str, col: str) -> list[str]:
    return ["    for r in range(4):"] + [
        f"        C[{row}{' + 16' if i else ''} + 4 * (lane // 16) + r, {col}{' + 16' if j else ''} + lane % 16]"
        f" = c{i}{j}[r]" for i in (0, 1) for j in (0, 1)]


def mma_ldmatrix_compute(steps: int, indent: str) -> list[str]:
    """Per K step of 16: ldmatrix x4 of the warp's 16x16 A slice (lanes 0-15 give rows at column
    0, lanes 16-31 at column 8), ldmatrix x2.trans of the 16x8 B slice, one mma.sync m16n8k16."""
    return [f"{indent}for s in range({steps}):",
            f"{indent}    a = ldmatrix_x4(As[wm * 16 + lane % 8 + 8 * (lane // 8 % 2), s * 16 + 8 * (lane // 16)])",
            f"{indent}    b = ldmatrix_x2_trans(Bs[s * 16 + lane % 16, wn * 8])",
            f"{indent}    acc = mma_m16n8k16_bf16(a, b, acc)"]


def fma_compute(steps: int, indent: str) -> list[str]:
    """Scalar FMAs from the shared tiles: lane `lane` of wave (wm, wn) owns rows lane // 8 * 4 + i
    and columns lane % 8 * 4 + j of the wave's 32x32 tile; the K pairing is an explicit assertion
    (no instruction implies it)."""
    return [f"{indent}for s in range({steps}):", f"{indent}    for i in range(4):",
            f"{indent}        for j in range(4):",
            f"{indent}            x = As[wm * 32 + lane // 8 * 4 + i, s]",
            f"{indent}            y = Bs[s, wn * 32 + lane % 8 * 4 + j]",
            f"{indent}            assert_tag(x, y, lambda ta, tb: ta[1] == tb[0])",
            f"{indent}            acc[i * 4 + j] += x * y"]


def fma_epilogue(row: str, col: str) -> list[str]:
    return ["    for i in range(4):", "        for j in range(4):",
            f"            C[{row} + lane // 8 * 4 + i, {col} + lane % 8 * 4 + j] = acc[i * 4 + j]"]


def mma_epilogue(row: str, col: str) -> list[str]:
    return ["    for r in range(4):",
            f"        C[{row} + lane // 4 + 8 * (r // 2), {col} + 2 * (lane % 4) + r % 2] = acc[r]"]


MFMA16_ACCUMULATORS = [f"    c{i}{j} = local(f32, (4,), init=0)" for i in (0, 1) for j in (0, 1)]


def render(spec: GemmSpec | AttentionSpec) -> str:
    """The `.ave` text of a drawn kernel."""
    if isinstance(spec, AttentionSpec):
        return render_attention(spec)
    if spec.naive:
        return NAIVE
    bm, bn, kt, t = spec.bm, spec.bn, spec.k_tile, spec.threads
    ea, eb = bm * kt // t, kt * bn // t
    header = f"from ave.amdgpu import mfma_f32_{spec.instruction}_bf16"
    registers = ["    a = local(bf16, (4,))", "    b = local(bf16, (4,))"]
    if spec.nvidia:
        header = "from ave.nvidia import mma_m16n8k16_bf16, ldmatrix_x4, ldmatrix_x2_trans"
        compute = mma_ldmatrix_compute(kt // 16, "        ")
        epilogue = mma_epilogue("bm + wm * 16", "bn + wn * 8")
        registers = ["    a = local(bf16, (8,))", "    b = local(bf16, (4,))"]
        accumulators = ["    acc = local(f32, (4,), init=0)"]
    elif spec.instruction == "fma":
        header = ""
        compute = fma_compute(kt, "        ")
        epilogue = fma_epilogue("bm + wm * 32", "bn + wn * 32")
        registers = []
        accumulators = ["    acc = local(f32, (16,), init=0)"]
    elif spec.instruction == "16x16x16":
        compute = mfma16_compute("wm * 32", "wn * 32", kt // 16, "        ")
        epilogue = mfma16_epilogue("bm + wm * 32", "bn + wn * 32")
        accumulators = MFMA16_ACCUMULATORS
    else:
        compute = mfma32_compute("wm * 32", "wn * 32", kt // 8, "        ")
        epilogue = mfma32_epilogue("bm + wm * 32", "bn + wn * 32")
        accumulators = ["    acc = local(f32, (16,), init=0)"]
    if spec.split_k > 1:
        compute, epilogue = split_k_compute(compute, spec.split_k), split_k_epilogue(epilogue)
    body = "\n".join(registers + accumulators) + f"""
    for kt in range(0, K, {kt}):
        for e in range({ea}):
            i = {copy_index(spec.copy_width, ea, t, "e")}
            As[i // {kt}, i % {kt}] = A[bm + i // {kt}, kt + i % {kt}]
        for f in range({eb}):
            j = {copy_index(spec.copy_width, eb, t, "f")}
            Bs[j // {bn}, j % {bn}] = B[kt + j // {bn}, bn + j % {bn}]
        syncthreads()
""" + "\n".join(compute) + "\n        syncthreads()\n" + "\n".join(epilogue) + "\n"
    group = "warp=32" if spec.nvidia else "wave=64"
    tolerance = "" if spec.tolerance is None else f", tolerance={spec.tolerance:g}"
    src, sh = spec.input_dtype, spec.shared_dtype
    return f'''{header + chr(10) if header else ""}
@kernel(grid=(M // {bm}, N // {bn}), block={t}, {group}, reference="C = A @ B"{tolerance})
def {spec.name}(A: Tensor[{src}, (M, K)], B: Tensor[{src}, (K, N)], C: Tensor[f32, (M, N)]):
    assume(M % {bm} == 0, N % {bn} == 0, K % {kt} == 0, K >= {kt})
    tag(A, lambda m, k: (m, k), "A")
    tag(B, lambda k, n: (k, n), "B")
    t = thread_id(0)
    {"w" if spec.split_k == 1 else "wk"} = {"warp_id" if spec.nvidia else "wave_id"}()
    lane = lane_id()
{_split_waves(spec)}    wm = w // {spec.waves_n}
    wn = w % {spec.waves_n}
    bm = block_id(0) * {bm}
    bn = block_id(1) * {bn}
    As = shared({sh}, ({bm}, {kt + spec.pad}){_layout(bm, kt, spec.swizzle_a)})
    Bs = shared({sh}, ({kt}, {bn + spec.pad}){_layout(kt, bn, spec.swizzle_b)})
{_split_buffer(spec)}''' + body


def _split_waves(spec: GemmSpec) -> str:
    """Split-K: wave wk is wave w = wk % (waves_m * waves_n) of K group g = wk // (waves_m * waves_n)."""
    if spec.split_k == 1:
        return ""
    n = spec.waves_m * spec.waves_n
    return f"    g = wk // {n}\n    w = wk % {n}\n"


def _split_buffer(spec: GemmSpec) -> str:
    if spec.split_k == 1:
        return ""
    return f"    Cs = shared(f32, ({spec.waves_m * spec.waves_n}, {4 if spec.nvidia else 16}, {32 if spec.nvidia else 64}))\n"


def split_k_compute(compute: list[str], split: int) -> list[str]:
    """Group g runs K steps g*h .. g*h + h - 1 of the compute loop's `split * h`."""
    head = compute[0]
    steps = int(head[head.index("range(") + 6:head.rindex(")")])
    h = steps // split
    return [head.replace(f"range({steps})", f"range(g * {h}, g * {h} + {h})")] + compute[1:]


def split_k_epilogue(epilogue: list[str]) -> list[str]:
    """Group 1 parks its accumulators in Cs (same wave, slot and lane); after a barrier group 0
    adds them to its own and stores C."""
    import re

    store = re.compile(r"^(\s*)C\[(.*)\] = acc\[(.*)\]$")
    park, finish = [], []
    for ln in epilogue:
        m = store.match(ln)
        park.append("    " + (f"{m.group(1)}Cs[w, {m.group(3)}, lane] = acc[{m.group(3)}]" if m else ln))
        finish.append("    " + (f"{m.group(1)}C[{m.group(2)}] = acc[{m.group(3)}] + Cs[w, {m.group(3)}, lane]"
                                if m else ln))
    return ["    if g == 1:", *park, "    syncthreads()", "    if g == 0:", *finish]


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


def render_attention(spec: AttentionSpec) -> str:
    g = spec.group
    score = "s[r] * 0.2550348616"  # log2(e) / sqrt(32): exp2 of scaled scores is the softmax
    masked = (f"select(kb + lane % 32 <= q0 + 8 * (r // 4) + 4 * (lane // 32) + r % 4, {score}, -1e+30)"
              if spec.causal else score)
    return f'''from ave.amdgpu import mfma_f32_32x32x8_bf16

@kernel(grid=(S // 32, H), block=64, wave=64, reference="O = attention(Q, K, V, causal={spec.causal})")
def attention_fuzz(Q: Tensor[bf16, (H, S, 32)], K: Tensor[bf16, (HKV, S, 32)], V: Tensor[bf16, (HKV, S, 32)], O: Tensor[f32, (H, S, 32)]):
    assume(H == {g} * HKV, S % 32 == 0)
    tag(Q, lambda h, q, d: (h, q, d), "Q")
    tag(K, lambda g, s, d: (g, d, s), "Kt")
    tag(V, lambda g, s, d: (g, s, d), "V")
    tag(O, lambda h, q, d: (h, q, d), "O")
    lane = lane_id()
    h = block_id(1)
    g = h // {g}
    q0 = block_id(0) * 32
    Ps = shared(bf16, (32, 32))
    qa = local(bf16, (4,))
    kt = local(bf16, (4,))
    pa = local(bf16, (4,))
    vb = local(bf16, (4,))
    o = local(f32, (16,), init=0)
    m = local(f32, (16,), init=-1e+30)
    l = local(f32, (16,), init=0)
    for kb in range(0, S, 32):
        s = local(f32, (16,), init=0)
        for ds in range(0, 32, 8):
            for v in range(4):
                qa[v] = Q[h, q0 + lane % 32, ds + 4 * (lane // 32) + v]
                kt[v] = K[g, kb + lane % 32, ds + 4 * (lane // 32) + v]
            assert_tag(qa, kt, lambda tq, tk: tq[0] // {g} == tk[0])
            s = mfma_f32_32x32x8_bf16(qa, kt, s)
        for r in range(16):
            x = {masked}
            m_new = fmax(m[r], lane_max(x, 32))
            p = exp2(x - m_new)
            corr = exp2(m[r] - m_new)
            l[r] = l[r] * corr + lane_sum(p, 32)
            o[r] = o[r] * corr
            m[r] = m_new
            Ps[8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32] = p
        syncthreads()
        for ks in range(0, 32, 8):
            for v in range(4):
                pa[v] = Ps[lane % 32, ks + 4 * (lane // 32) + v]
                vb[v] = V[g, kb + ks + 4 * (lane // 32) + v, lane % 32]
            assert_tag(pa, vb, lambda tp, tv: tp[0] // {g} == tv[0])
            o = mfma_f32_32x32x8_bf16(pa, vb, o)
        syncthreads()
    for r in range(16):
        O[h, q0 + 8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32] = o[r] / l[r]
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
