"""Each technique of the knowledge base, applied to drawn GEMMs where its precondition holds,
yields a kernel that passes every correctness gate: VERIFIED with each invariant it names proved,
and host-correct (issue 14, item 8). The only rejections allowed are the model's (no estimated
gain) and the front end's resource limits (a tile that does not fit the target's shared memory)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")

from ave_planner.episode import Settings, run_episode  # noqa: E402
from ave_planner.knowledge import load_knowledge  # noqa: E402
from ave_planner.model import estimate  # noqa: E402
from ave_planner.policy import arms  # noqa: E402
from ave_planner.preconditions import applicable  # noqa: E402
from ave_planner.rewrites import Candidate, Recipe  # noqa: E402

from ave_decl.testing.strategies import gemm_specs  # noqa: E402
from ave_decl.transform.gemm_templates import GemmSpec  # noqa: E402

KB = load_knowledge()
TARGET = {False: "amdgpu", True: "nvptx"}


def _start(spec: GemmSpec) -> Candidate:
    if spec.naive:  # the naive template's tensors are f32
        spec = dataclasses.replace(spec, input_dtype="f32", name="gemm_naive_fuzz")
    return Candidate(Recipe(spec).render(), Recipe(spec))


@settings(max_examples=4)
@given(spec=gemm_specs().filter(lambda s: s.swizzle_a is None and s.swizzle_b is None), pick=st.randoms())
def test_every_applicable_technique_keeps_the_kernel_verified_and_correct(spec, pick):
    target = TARGET[spec.nvidia]
    s = Settings(target, {"amdgpu": "mi300x", "nvptx": "h200"}[target], {"M": 2048, "N": 2048, "K": 2048},
                 {"M": 128, "N": 128, "K": 192})
    start = _start(spec)
    before = estimate(start.text, s.sizes, s.device)
    held = sorted(applicable(start.text, [t for t in KB.values() if target in t.targets]))
    assert held, spec  # every drawn GEMM admits at least staging or retiling
    for tid in held:
        options = arms(KB[tid], target)
        params = options[pick.randrange(len(options))]
        ep = run_episode(1, start, before, KB[tid], params, s).episode
        allowed = ep.outcome in ("accepted", "not applicable") or ep.gate == "model" \
            or (ep.gate == "check" and "allows" in ep.reason and "bytes" in ep.reason)
        assert allowed, (spec, tid, params, ep.gate, ep.reason)
