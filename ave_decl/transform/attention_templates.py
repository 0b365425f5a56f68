"""The attention ladder the planner lowers into: one record (`AttnSpec`) per step from the naive
kernel (`examples/attention/attention_naive.ave`) to a flash-style one, and the `.ave` text it stands for.

Why a record and not AST surgery: each step (online softmax, K/V tiles in shared memory, matrix
instructions, V transposed through shared memory, causal block skipping) changes the kernel's
loop structure, so the planner re-renders it with every earlier choice kept, as it does for the
GEMM templates (`gemm_templates.py`). Every form keeps the same signature and reference
(`O = attention(Q, K, V, causal=...)`, f32 tensors (H, S, 32)), so each is checked against the
same numpy reference.
"""
from __future__ import annotations

from dataclasses import dataclass

SCALE = "0.2550348616"  # log2(e) / sqrt(32): exp2 of the scaled scores is the softmax's exp
D = 32  # the head dimension the ladder is written for


@dataclass(frozen=True)
class AttnSpec:
    online: bool = False  # one pass over the keys with a running max and sum (else: a max pass, then a sum pass)
    staged: bool = False  # K and V tiles of `kv_tile` keys copied into shared memory once per block
    instruction: str = "fma"  # "fma": one thread per query row; "32x32x8": one wave per 32 queries, MFMAs
    waves: int = 1  # MFMA form: waves per block, each 32 queries (they share the staged K and V tiles)
    v_transposed: bool = False  # V stored transposed (d, key) in shared memory: the B operand's 4 keys contiguous
    pad: int = 0  # elements added to each row of the shared tiles (bank conflicts)
    kv_tile: int = 64  # keys per shared tile (scalar form; the MFMA form uses 32)
    causal: bool = False
    skip: bool = False  # causal: the key loop stops after the diagonal tile
    name: str = "attention_naive"

    @property
    def tolerance(self) -> float | None:
        """bf16 operands (matrix instructions) give up precision; the scalar forms are f32 throughout."""
        return 1e-2 if self.instruction != "fma" else None

    @property
    def queries(self) -> int:
        """Query rows per block."""
        return 64 if self.instruction == "fma" else 32 * self.waves

    @property
    def tile(self) -> int:
        return self.kv_tile if self.instruction == "fma" else 32


def render_attention_ladder(spec: AttnSpec) -> str:
    """The `.ave` text of one step of the ladder."""
    if spec.instruction != "fma":
        return _mfma(spec)
    return _scalar(spec)


def _header(spec: AttnSpec, grid: str, block: int) -> str:
    tol = "" if spec.tolerance is None else f", tolerance={spec.tolerance:g}"
    imports = "from ave.amdgpu import mfma_f32_32x32x8_bf16\n\n" if spec.instruction != "fma" else ""
    return f'''{imports}@kernel(grid={grid}, block={block}, wave=64, reference="O = attention(Q, K, V, causal={spec.causal})"{tol})
def {spec.name}(Q: Tensor[f32, (H, S, {D})], K: Tensor[f32, (H, S, {D})], V: Tensor[f32, (H, S, {D})],
{" " * (len(spec.name) + 5)}O: Tensor[f32, (H, S, {D})]):
    assume(S % 128 == 0)
    tag(Q, lambda h, q, d: (h, q, d), "Q")
    tag(K, lambda h, s, d: (h, d, s), "Kt")
    tag(V, lambda h, s, d: (h, s, d), "V")
'''


def _key_loop(spec: AttnSpec, step: int) -> str:
    """The loop over keys (tiles): causal block skipping stops after the tile holding the
    block's last query."""
    hi = f"qb + {spec.queries}" if spec.skip else "S"
    return f"range(0, {hi}, {step})" if step > 1 or spec.skip else f"range({hi})"


def _score(spec: AttnSpec, key: str, kref: str, indent: str) -> list[str]:
    """x = the scaled score of query q and key `key` (masked when causal)."""
    lines = [f"{indent}x = 0.0", f"{indent}for d in range({D}):", f"{indent}    a = qr[d]",
             f"{indent}    b = {kref}", f"{indent}    assert_tag(a, b, lambda ta, tb: ta[0] == tb[0] and ta[2] == tb[1])",
             f"{indent}    x += a * b"]
    y = f"x * {SCALE}"
    lines.append(f"{indent}y = select({key} <= q, {y}, -1e+30)" if spec.causal else f"{indent}y = {y}")
    return lines


def _scalar(spec: AttnSpec) -> str:
    """One thread per query row; scalar FMAs over the head dimension."""
    kt = spec.tile
    out = [_header(spec, "(S // 64, H)", 64).rstrip("\n"),
           "    h = block_id(1)", "    qb = block_id(0) * 64", "    q = qb + thread_id(0)"]
    if spec.staged:
        out += [f"    Ks = shared(f32, ({kt}, {D}))", f"    Vs = shared(f32, ({kt}, {D}))"]
    out += [f"    qr = local(f32, ({D},))", f"    o = local(f32, ({D},), init=0)", "    mx = -1e+30",
            f"    for d in range({D}):", "        qr[d] = Q[h, q, d]"]
    if not spec.online:  # the max pass re-reads every K row
        out += [f"    for s in {_key_loop(spec, 1)}:"] + _score(spec, "s", "K[h, s, d]", "        ") + [
            "        mx = fmax(mx, y)"]
    out.append("    l = 0.0")
    if spec.staged:
        per = kt * D // 64
        out += [f"    for kb in {_key_loop(spec, kt)}:", f"        for e in range({per}):",
                "            i = e * 64 + thread_id(0)",
                f"            Ks[i // {D}, i % {D}] = K[h, kb + i // {D}, i % {D}]",
                f"            Vs[i // {D}, i % {D}] = V[h, kb + i // {D}, i % {D}]",
                "        syncthreads()", f"        for j in range({kt}):"]
        ind, key, kref, vref = "            ", "kb + j", "Ks[j, d]", "Vs[j, d]"
    else:
        out.append(f"    for s in {_key_loop(spec, 1)}:")
        ind, key, kref, vref = "        ", "s", "K[h, s, d]", "V[h, s, d]"
    out += _score(spec, key, kref, ind)
    if spec.online:
        out += [f"{ind}m_new = fmax(mx, y)", f"{ind}corr = exp2(mx - m_new)", f"{ind}p = exp2(y - m_new)",
                f"{ind}l = l * corr + p", f"{ind}for d in range({D}):", f"{ind}    o[d] = o[d] * corr + p * {vref}",
                f"{ind}mx = m_new"]
    else:
        out += [f"{ind}p = exp2(y - mx)", f"{ind}l += p", f"{ind}for d in range({D}):", f"{ind}    o[d] += p * {vref}"]
    if spec.staged:
        out.append("        syncthreads()")
    out += [f"    for d in range({D}):", "        O[h, q, d] = o[d] / l"]
    return "\n".join(out) + "\n"


def _mfma(spec: AttnSpec) -> str:
    """`waves` waves per block, each owning 32 queries: S = Q K^T and O += P V on MFMA 32x32x8
    (bf16 operands, f32 accumulators), the Q fragment loaded once, the online softmax on the C
    layout (row statistics over the 32 lanes holding one row), P re-laid out through shared
    memory into the A-operand layout. Staged: the block's threads copy a 32-key tile of K and of
    V (transposed: (d, key), so a lane's 4 keys of the B operand are contiguous) into shared
    memory once for all its waves; otherwise every wave reads K and V from global memory."""
    w, pad, row = spec.waves, spec.pad, "8 * (r // 4) + 4 * (lane // 32) + r % 4"
    score = f"s[r] * {SCALE}"
    x = f"select(kb + lane % 32 <= q0 + {row}, {score}, -1e+30)" if spec.causal else score
    shared = [f"    Ps = shared(bf16, ({32 * w}, {32 + pad}))"]
    copy: list[str] = []
    k_read = f"K[h, kb + lane % 32, ds + 4 * (lane // 32) + v]"
    v_read = "V[h, kb + ks + 4 * (lane // 32) + v, lane % 32]"
    if spec.staged:
        per = 32 * D // (64 * w)
        shared.append(f"    Ks = shared(bf16, (32, {D + pad}))")
        copy = [f"        for e in range({per}):", f"            i = e * {64 * w} + t",
                f"            Ks[i // {D}, i % {D}] = K[h, kb + i // {D}, i % {D}]"]
        k_read = "Ks[lane % 32, ds + 4 * (lane // 32) + v]"
        if spec.v_transposed:  # thread t copies keys (t // 32) * per .. + per - 1 of column d = t % 32
            shared.append(f"    Vt = shared(bf16, ({D}, {32 + pad}))")
            copy.append(f"            Vt[t % {D}, t // {D} * {per} + e] = V[h, kb + t // {D} * {per} + e, t % {D}]")
            v_read = "Vt[lane % 32, ks + 4 * (lane // 32) + v]"
        else:
            shared.append(f"    Vs = shared(bf16, (32, {D + pad}))")
            copy.append(f"            Vs[i // {D}, i % {D}] = V[h, kb + i // {D}, i % {D}]")
            v_read = "Vs[ks + 4 * (lane // 32) + v, lane % 32]"
        copy.append("        syncthreads()")
    lines = [_header(spec, f"(S // {32 * w}, H)", 64 * w).rstrip("\n"),
             "    t = thread_id(0)", "    lane = lane_id()", "    pw = wave_id() * 32", "    h = block_id(1)",
             f"    qb = block_id(0) * {32 * w}", "    q0 = qb + pw", *shared,
             f"    qf = local(bf16, ({D // 2},))", "    qa = local(bf16, (4,))", "    kf = local(bf16, (4,))",
             "    pa = local(bf16, (4,))", "    vb = local(bf16, (4,))", "    o = local(f32, (16,), init=0)",
             "    m = local(f32, (16,), init=-1e+30)", "    l = local(f32, (16,), init=0)",
             f"    for f in range({D // 2}):", "        qf[f] = Q[h, q0 + lane % 32, f // 4 * 8 + 4 * (lane // 32) + f % 4]",
             f"    for kb in {_key_loop(spec, 32)}:", *copy, "        s = local(f32, (16,), init=0)",
             f"        for ds in range(0, {D}, 8):", "            for v in range(4):",
             "                qa[v] = qf[ds // 2 + v]", f"                kf[v] = {k_read}",
             "            assert_tag(qa, kf, lambda tq, tk: tq[0] == tk[0])",
             "            s = mfma_f32_32x32x8_bf16(qa, kf, s)",
             "        for r in range(16):", f"            x = {x}", "            m_new = fmax(m[r], lane_max(x, 32))",
             "            p = exp2(x - m_new)", "            corr = exp2(m[r] - m_new)",
             "            l[r] = l[r] * corr + lane_sum(p, 32)", "            o[r] = o[r] * corr", "            m[r] = m_new",
             f"            Ps[pw + {row}, lane % 32] = p", "        syncthreads()",
             "        for ks in range(0, 32, 8):", "            for v in range(4):",
             "                pa[v] = Ps[pw + lane % 32, ks + 4 * (lane // 32) + v]", f"                vb[v] = {v_read}",
             "            assert_tag(pa, vb, lambda tp, tv: tp[0] == tv[0])",
             "            o = mfma_f32_32x32x8_bf16(pa, vb, o)", "        syncthreads()",
             "    for r in range(16):", f"        O[h, q0 + {row}, lane % 32] = o[r] / l[r]"]
    return "\n".join(lines) + "\n"
