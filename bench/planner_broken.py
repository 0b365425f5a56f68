"""The planner rejecting invalid candidates (docs/planner.md): test-only techniques whose
rewrites are wrong. GEMM: the swizzle of examples/gemm_lds_mfma.ave applied to its shared stores
but not its loads. Attention: V staged transposed, (d, key), but read back as if it were not.
Each episode is rejected at the `check` gate with the counterexample a user (or a repair agent)
would read, replayed by the simulator. Run: `.venv/bin/python bench/planner_broken.py`."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from ave_decl.transform.catalogue import xor_swizzle_writes_only
from ave_planner.episode import Settings
from ave_planner.knowledge import knowledge_dir, load_knowledge
from ave_planner.optimize import optimize
from ave_planner.policy import BanditPlanner, History
from ave_planner.rewrites import REWRITES, Candidate, _ast

from ave_decl.transform.attention_templates import AttnSpec, render_attention_ladder

ROOT = Path(__file__).resolve().parent.parent
STAGED_ATTENTION = AttnSpec(online=True, instruction="32x32x8", staged=True, waves=4, pad=4)


def transpose_v_read_untransposed(c: Candidate, p: dict) -> Candidate | None:
    """V stored transposed, read with the untransposed index: P's key k meets V's key lane % 32.
    (The start kernel is rendered here, so it is not a recognised naive kernel with a recipe:
    the transposed form is rendered from the same record.)"""
    if c.text != render_attention_ladder(STAGED_ATTENTION):
        return None
    good = render_attention_ladder(dataclasses.replace(STAGED_ATTENTION, v_transposed=True))
    return Candidate(good.replace("Vt[lane % 32, ks + 4 * (lane // 32) + v]",
                                  "Vt[ks + 4 * (lane // 32) + v, lane % 32]"), None)


def rejected(technique: str, name: str, fn, text: str, path: str, s: Settings) -> None:
    """One episode of `technique` with its rewrite replaced by `fn`, from the kernel `text`."""
    rewrites = {**REWRITES, name: fn}
    with tempfile.TemporaryDirectory() as d:
        src = (knowledge_dir() / f"{technique}.toml").read_text()
        rewrite = next(ln for ln in src.splitlines() if ln.startswith("rewrite = "))
        (Path(d) / f"{technique}.toml").write_text(src.replace(rewrite, f'rewrite = "{name}"'))
        kb = load_knowledge(d, rewrites)
    r = optimize(text, path, kb, BanditPlanner(), s, 1, History(None), rewrites=rewrites)
    (ep,) = r.episodes
    cx = ep.counterexample or {}
    print(f"episode 1 {ep.technique} {ep.params}: {ep.outcome} at gate {ep.gate}")
    print(f"  {ep.reason}")
    print(f"  counterexample: {({k: cx[k] for k in ('block', 'thread_linear', 'lane', 'iterations') if k in cx})}")
    replay = cx.get("replay") or {}
    print(f"  replayed by the simulator: {replay.get('confirmed')} ({replay.get('detail', '')})")
    print(f"  best.ave is the input: {r.best.text == text}")


def main() -> None:
    gemm = ROOT / "examples" / "gemm_lds_mfma.ave"
    rejected("swizzle_shared", "swizzle_writes_only", lambda c, p: _ast(c, xor_swizzle_writes_only), gemm.read_text(),
             "examples/gemm_lds_mfma.ave",
             Settings("amdgpu", "mi300x", {"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 128, "K": 192}))
    rejected("transpose_v", "transpose_v_read_untransposed", transpose_v_read_untransposed,
             render_attention_ladder(STAGED_ATTENTION), "attention_staged.ave",
             Settings("amdgpu", "mi300x", {"H": 32, "S": 4096}, {"H": 1, "S": 128}))


if __name__ == "__main__":
    main()
