"""The planner rejecting an invalid candidate (docs/planner.md): a test-only technique whose
rewrite swizzles the shared stores of examples/gemm_lds_mfma.ave but not its loads. The episode
is rejected at the `check` gate with the counterexample a user (or a repair agent) would read,
replayed by the simulator. Run: `.venv/bin/python bench/planner_broken.py`."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ave_decl.transform.catalogue import xor_swizzle_writes_only
from ave_planner.episode import Settings
from ave_planner.knowledge import knowledge_dir, load_knowledge
from ave_planner.optimize import optimize
from ave_planner.policy import BanditPlanner, History
from ave_planner.rewrites import REWRITES, _ast

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    rewrites = {**REWRITES, "swizzle_writes_only": lambda c, p: _ast(c, xor_swizzle_writes_only)}
    with tempfile.TemporaryDirectory() as d:
        text = (knowledge_dir() / "swizzle_shared.toml").read_text()
        (Path(d) / "swizzle_shared.toml").write_text(text.replace('rewrite = "swizzle_shared"',
                                                                  'rewrite = "swizzle_writes_only"'))
        kb = load_knowledge(d, rewrites)
    s = Settings("amdgpu", "mi300x", {"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 128, "K": 192})
    path = ROOT / "examples" / "gemm_lds_mfma.ave"
    r = optimize(path.read_text(), "examples/gemm_lds_mfma.ave", kb, BanditPlanner(), s, 1, History(None),
                 rewrites=rewrites)
    (ep,) = r.episodes
    cx = ep.counterexample or {}
    print(f"episode 1 {ep.technique} {ep.params}: {ep.outcome} at gate {ep.gate}")
    print(f"  {ep.reason}")
    print(f"  counterexample: {({k: cx[k] for k in ('block', 'thread_linear', 'lane', 'iterations') if k in cx})}")
    replay = cx.get("replay") or {}
    print(f"  replayed by the simulator: {replay.get('confirmed')} ({replay.get('detail', '')})")
    print(f"  best.ave is the input: {r.best.text == path.read_text()}")


if __name__ == "__main__":
    main()
