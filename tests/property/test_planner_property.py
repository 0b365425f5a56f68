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


@st.composite
def attention_steps(draw) -> "AttnSpec":
    """A step of the attention ladder (examples/attention/attention_naive.ave and what the techniques make of it)."""
    from ave_decl.transform.attention_templates import AttnSpec

    causal, online = draw(st.booleans()), draw(st.booleans())
    mfma = online and draw(st.booleans())
    staged = mfma and draw(st.booleans())
    return AttnSpec(online=online, causal=causal, skip=causal and draw(st.booleans()),
                    instruction="32x32x8" if mfma else "fma", staged=staged,
                    waves=draw(st.sampled_from([2, 4])) if staged else 1,
                    v_transposed=staged and draw(st.booleans()), pad=draw(st.sampled_from([0, 4])) if mfma else 0)


@pytest.mark.slow  # matrix-instruction attention kernels run for over 10 s each on the host
@settings(max_examples=3, deadline=None)
@given(spec=attention_steps())
def test_every_applicable_attention_technique_keeps_the_kernel_verified_and_correct(spec):
    from ave_planner.rewrites import AttnRecipe

    from ave_decl.transform.attention_templates import render_attention_ladder

    s = Settings("amdgpu", "mi300x", {"H": 32, "S": 4096}, {"H": 1, "S": 128}, measure=False)
    start = Candidate(render_attention_ladder(spec), AttnRecipe(spec))
    before = estimate(start.text, s.sizes, s.device)
    for tid in sorted(applicable(start.text, [t for t in KB.values() if "amdgpu" in t.targets])):
        for params in arms(KB[tid], "amdgpu")[:1]:
            ep = run_episode(1, start, before, KB[tid], params, s).episode
            assert ep.outcome in ("accepted", "not applicable") or ep.gate == "model", (spec, tid, ep.gate, ep.reason)
