"""The named rewrites that the knowledge base's `rewrite = "..."` fields refer to.

A candidate kernel is its `.ave` text plus, when the planner recognises it as a GEMM it can
re-render, a `Recipe`: the template record (`ave_decl.transform.gemm_templates.GemmSpec`) and the
AST rewrites applied after rendering (the pipeline); a naive attention kernel gets an
`AttnRecipe` (`ave_decl.transform.attention_templates.AttnSpec`) the attention techniques change. A structural technique (shared-memory
staging, a matrix instruction, retiling, vector copies, a swizzle) changes the record, so the
kernel is rendered again with every earlier choice kept; a technique on any kernel is an AST
rewrite from `ave_decl.transform`. A rewrite returns None where it does not apply (the
planner records the episode as "not applicable"), never a half-changed kernel.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.transform.catalogue import pipeline_k_loop, pipeline_k_loop_3_stages, vectorize_copies, xor_swizzle_shared
from ave_decl.transform.gemm_rewrites import register_prefetch_k_loop
from ave_decl.transform.attention_templates import AttnSpec, render_attention_ladder
from ave_decl.transform.gemm_templates import GemmSpec, render, valid_swizzles

MATRIX_INSTRUCTIONS = {"amdgpu": ("32x32x8", "16x16x16"), "host": ("32x32x8", "16x16x16"), "nvptx": ("m16n8k16",)}


@dataclass(frozen=True)
class Recipe:
    spec: GemmSpec
    stages: int = 0  # 0: not pipelined; 2 or 3: pipeline_k_loop after rendering
    prefetch: bool = False  # register_prefetch_k_loop after rendering (instead of a pipeline)

    def render(self) -> str | None:
        """The kernel's text, or None when a later step no longer applies to the new record."""
        module = parse_text(render(self.spec).lstrip("\n"), f"{self.spec.name}.ave")
        if self.stages or self.prefetch:
            fn = register_prefetch_k_loop if self.prefetch else \
                pipeline_k_loop if self.stages == 2 else pipeline_k_loop_3_stages
            piped = fn(module)
            if piped == module:
                return None
            module = piped
        return printer.module(module)


@dataclass(frozen=True)
class AttnRecipe:
    spec: AttnSpec

    def render(self) -> str:
        return render_attention_ladder(self.spec)


@dataclass(frozen=True)
class Candidate:
    text: str
    recipe: Recipe | AttnRecipe | None = None


def recognise(text: str, path: str = "<kernel>") -> Recipe | AttnRecipe | None:
    """A naive GEMM the templates can re-render: one kernel, `reference="C = A @ B"`, tensors
    A (M, K), B (K, N), C (M, N) with f32 output, and no shared memory or matrix instruction; or
    a naive attention kernel (`recognise_attention`)."""
    module = parse_text(text, path)
    if len(module.kernels) != 1 or module.imports:
        return None
    k = module.kernels[0]
    ref = next((kw.value for kw in k.decorator.kwargs if kw.name == "reference"), None)
    shapes = {p.name: printer.expr(p.annotation) for p in k.params if p.annotation is not None}
    if ref is not None and printer.expr(ref) in ('"O = attention(Q, K, V, causal=False)"',
                                                 '"O = attention(Q, K, V, causal=True)"'):
        return _attention(k, shapes, "causal=True" in printer.expr(ref))
    if ref is None or printer.expr(ref) != '"C = A @ B"':
        return None
    a = re.fullmatch(r"Tensor\[(bf16|f32), \(M, K\)\]", shapes.get("A", ""))
    b = re.fullmatch(r"Tensor\[(bf16|f32), \(K, N\)\]", shapes.get("B", ""))
    if not a or not b or a.group(1) != b.group(1) or shapes.get("C") != "Tensor[f32, (M, N)]" or len(shapes) != 3:
        return None
    body = printer.kernel(k)
    if "shared(" in body or "mfma" in body or "mma_" in body:
        return None
    return Recipe(GemmSpec(naive=True, input_dtype=a.group(1), name=k.name))


def _attention(k, shapes: dict[str, str], causal: bool) -> AttnRecipe | None:
    """A naive attention kernel the ladder re-renders: Q, K, V, O all `Tensor[f32, (H, S, 32)]`,
    no shared memory, no matrix instruction, no lane exchange (each thread owns a query row)."""
    if shapes != {n: "Tensor[f32, (H, S, 32)]" for n in ("Q", "K", "V", "O")}:
        return None
    body = printer.kernel(k)
    if any(w in body for w in ("shared(", "mfma", "mma_", "lane_", "shuffle")):
        return None
    return AttnRecipe(AttnSpec(causal=causal, name=k.name))


def _gemm(c: Candidate) -> Recipe | None:
    return c.recipe if isinstance(c.recipe, Recipe) else None


def _attn(c: Candidate) -> AttnSpec | None:
    return c.recipe.spec if isinstance(c.recipe, AttnRecipe) else None


def _reattn(c: Candidate, **changes) -> Candidate | None:
    """The attention kernel rendered again with `changes` to its record (None if nothing changes)."""
    spec = _attn(c)
    assert spec is not None
    recipe = AttnRecipe(dataclasses.replace(spec, **changes))
    text = recipe.render()
    return None if text == c.text else Candidate(text, recipe)


Rewrite = Callable[[Candidate, dict], "Candidate | None"]


def _respec(c: Candidate, **changes) -> Candidate | None:
    assert isinstance(c.recipe, Recipe)
    recipe = dataclasses.replace(c.recipe, spec=dataclasses.replace(c.recipe.spec, **changes))
    text = recipe.render()
    return None if text is None or text == c.text else Candidate(text, recipe)


def _tile_fits(spec: GemmSpec) -> bool:
    """Every element of both shared tiles has one copying thread, and a vector never straddles a row."""
    t = spec.threads
    if (spec.bm * spec.k_tile) % t or (spec.k_tile * spec.bn) % t:
        return False
    per = (spec.bm * spec.k_tile // t, spec.k_tile * spec.bn // t)
    w = spec.copy_width
    return w <= 1 or all(n % w == 0 for n in (*per, spec.k_tile, spec.bn))


def stage_shared(c: Candidate, p: dict) -> Candidate | None:
    """Naive GEMM -> tiles of A and B staged in shared memory, scalar FMAs from them."""
    if _gemm(c) is None or not c.recipe.spec.naive:
        return None
    spec = dataclasses.replace(c.recipe.spec, naive=False, instruction="fma", waves_m=p["waves_m"],
                               waves_n=p["waves_n"], k_tile=p["k_tile"], copy_width=1)
    if not _tile_fits(spec):
        return None
    text = Recipe(spec).render()
    return None if text is None else Candidate(text, Recipe(spec))


def matrix_instruction(c: Candidate, p: dict) -> Candidate | None:
    """Scalar FMAs from shared tiles -> one matrix instruction per wave (warp) tile and K step;
    attention (online softmax): S = Q K^T and O += P V on MFMA 32x32x8, one wave per 32 queries."""
    a = _attn(c)
    if a is not None:
        if not a.online or a.instruction != "fma" or p["instruction"] != "32x32x8" \
                or p.get("target", "host") == "nvptx":
            return None
        return _reattn(c, instruction="32x32x8", staged=False)
    if _gemm(c) is None or c.recipe.spec.naive or c.recipe.spec.instruction != "fma" \
            or p["instruction"] not in MATRIX_INSTRUCTIONS[p.get("target", "host")]:
        return None
    step = {"32x32x8": 8, "16x16x16": 16, "m16n8k16": 16}[p["instruction"]]
    spec = dataclasses.replace(c.recipe.spec, instruction=p["instruction"])
    if spec.k_tile % step or not _tile_fits(spec):
        return None
    return _respec(c, instruction=p["instruction"])


def retile(c: Candidate, p: dict) -> Candidate | None:
    """Another block tile (waves along M and N) and K tile for a staged GEMM."""
    if _gemm(c) is None or c.recipe.spec.naive:
        return None
    spec = dataclasses.replace(c.recipe.spec, waves_m=p["waves_m"], waves_n=p["waves_n"], k_tile=p["k_tile"])
    step = {"32x32x8": 8, "16x16x16": 16, "m16n8k16": 16, "fma": 1}[spec.instruction]
    if spec.k_tile % step or not _tile_fits(spec) or spec.swizzle_a or spec.swizzle_b:
        return None
    return _respec(c, waves_m=p["waves_m"], waves_n=p["waves_n"], k_tile=p["k_tile"])


def vector_copies(c: Candidate, p: dict) -> Candidate | None:
    """Coalesced scalar copies -> each thread moves `width` contiguous elements per step."""
    if isinstance(c.recipe, AttnRecipe):
        return None
    if c.recipe is not None:
        if c.recipe.spec.naive or c.recipe.spec.copy_width == p["width"]:
            return None
        spec = dataclasses.replace(c.recipe.spec, copy_width=p["width"])
        return _respec(c, copy_width=p["width"]) if _tile_fits(spec) else None
    return _ast(c, lambda m: vectorize_copies(m, p["width"]))


def swizzle_shared(c: Candidate, p: dict) -> Candidate | None:
    """A bijective XOR swizzle of both shared tiles (recipe), or `c ^ (r % cols)` on every access."""
    if isinstance(c.recipe, AttnRecipe):
        return None
    if c.recipe is not None:
        spec = c.recipe.spec
        if spec.naive or spec.nvidia or spec.swizzle_a or spec.swizzle_b or c.recipe.stages:
            return None
        sa, sb = valid_swizzles(spec.bm, spec.k_tile), valid_swizzles(spec.k_tile, spec.bn)
        choice = p["bits"]
        pick_a = next((s for s in sa if s[0] == choice), None)
        pick_b = next((s for s in sb if s[0] == choice), None)
        if pick_a is None or pick_b is None:
            return None
        return _respec(c, swizzle_a=pick_a, swizzle_b=pick_b)
    return _ast(c, xor_swizzle_shared)


def register_prefetch(c: Candidate, p: dict) -> Candidate | None:
    """Two shared stages; the next K tile is loaded into registers before the current one is
    multiplied and stored into the other stage after (no async copies)."""
    g = _gemm(c)
    if g is None or g.spec.naive or g.stages or g.prefetch:
        return None
    recipe = dataclasses.replace(g, prefetch=True)
    text = recipe.render()
    return None if text is None else Candidate(text, recipe)


def split_k(c: Candidate, p: dict) -> Candidate | None:
    """`split` groups of waves per block share each K tile, each multiplying its share of the
    tile's K steps into its own accumulators; the partial sums meet through shared memory."""
    g = _gemm(c)
    if g is None or g.spec.naive or g.spec.split_k != 1 or g.spec.instruction == "16x16x16":
        return None
    step = {"32x32x8": 8, "m16n8k16": 16, "fma": 1}[g.spec.instruction]
    spec = dataclasses.replace(g.spec, split_k=p["split"])
    if (spec.k_tile // step) % p["split"] or not _tile_fits(spec) or spec.threads > 1024:
        return None
    return _respec(c, split_k=p["split"])


def pad_shared(c: Candidate, p: dict) -> Candidate | None:
    """`pad` more elements per row of both shared tiles (a multiple of the copy vector, so vector
    stores stay aligned), for a staged GEMM without a swizzle; for attention with matrix
    instructions, every shared tile (P, and K and V when staged)."""
    a = _attn(c)
    if a is not None:
        return None if a.instruction == "fma" else _reattn(c, pad=p["pad"])  # re-padding allowed
    if _gemm(c) is None:
        return None
    spec = c.recipe.spec
    if spec.naive or spec.pad or spec.swizzle_a or spec.swizzle_b or p["pad"] % max(spec.copy_width, 1):
        return None
    return _respec(c, pad=p["pad"])


def pipeline(c: Candidate, p: dict) -> Candidate | None:
    """An S-stage async-copy pipeline of the K loop."""
    stages = p["stages"]
    if isinstance(c.recipe, AttnRecipe):
        return None
    if c.recipe is not None:
        if c.recipe.spec.naive or c.recipe.stages or c.recipe.prefetch:
            return None
        recipe = dataclasses.replace(c.recipe, stages=stages)
        text = recipe.render()
        return None if text is None else Candidate(text, recipe)
    return _ast(c, pipeline_k_loop if stages == 2 else pipeline_k_loop_3_stages)


def online_softmax(c: Candidate, p: dict) -> Candidate | None:
    """Two passes over the keys (the row max, then exp and sums) -> one pass with a running max
    and sum that rescales the partial output whenever the max grows (flash-style)."""
    a = _attn(c)
    return None if a is None or a.online else _reattn(c, online=True)


def stage_kv(c: Candidate, p: dict) -> Candidate | None:
    """Attention on matrix instructions: `waves` waves per block share 32-key tiles of K and V
    that the block copies into shared memory once, instead of every wave reading them."""
    a = _attn(c)
    if a is None or a.instruction == "fma" or a.staged:
        return None
    return _reattn(c, staged=True, waves=p["waves"])


def transpose_v(c: Candidate, p: dict) -> Candidate | None:
    """V staged transposed, (d, key): the 4 keys a lane feeds to P V's B operand are contiguous."""
    a = _attn(c)
    return None if a is None or not a.staged or a.v_transposed else _reattn(c, v_transposed=True)


def skip_causal_blocks(c: Candidate, p: dict) -> Candidate | None:
    """Causal attention: the key loop stops after the tile holding the block's last query (the
    later tiles are fully masked)."""
    a = _attn(c)
    return None if a is None or not a.causal or a.skip else _reattn(c, skip=True)


def _ast(c: Candidate, fn) -> Candidate | None:
    module = parse_text(c.text, "<candidate>")
    out = fn(module)
    return None if out == module else Candidate(printer.module(out), None)


_TILE = {"waves_m": (1, 2, 4), "waves_n": (1, 2, 4), "k_tile": (8, 16, 32, 64)}
# The parameters each rewrite reads and the values it accepts: a knowledge file naming another
# parameter, or a value outside these, is refused when it is loaded (knowledge.py).
PARAMETERS: dict[str, dict[str, tuple]] = {
    "stage_shared": _TILE,
    "matrix_instruction": {"instruction": ("32x32x8", "16x16x16", "m16n8k16")},
    "retile": _TILE,
    "vector_copies": {"width": (2, 4, 8)},
    "swizzle_shared": {"bits": (1, 2, 3)},
    "pad_shared": {"pad": (2, 4, 8, 16)},
    "pipeline": {"stages": (2, 3)},
    "split_k": {"split": (2,)},
    "register_prefetch": {},
    "online_softmax": {},
    "stage_kv": {"waves": (2, 4)},
    "transpose_v": {},
    "skip_causal_blocks": {},
}

REWRITES: dict[str, Rewrite] = {
    "stage_shared": stage_shared,
    "matrix_instruction": matrix_instruction,
    "retile": retile,
    "vector_copies": vector_copies,
    "swizzle_shared": swizzle_shared,
    "pad_shared": pad_shared,
    "pipeline": pipeline,
    "split_k": split_k,
    "register_prefetch": register_prefetch,
    "online_softmax": online_softmax,
    "stage_kv": stage_kv,
    "transpose_v": transpose_v,
    "skip_causal_blocks": skip_causal_blocks,
}
