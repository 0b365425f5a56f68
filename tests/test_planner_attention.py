"""The planner's attention demonstration (issue 14, item 7): the attention techniques of the
knowledge base, their preconditions on both engines, each applied where it holds giving a
VERIFIED, host-correct kernel, the model's ranking of the attention ladder, and a short
`optimize` run from examples/attention/attention_naive.ave that accepts at least three techniques."""
from __future__ import annotations

import dataclasses

import pytest
from conftest import EXAMPLES

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")

from ave_planner.episode import Settings, run_episode  # noqa: E402
from ave_planner.knowledge import load_knowledge  # noqa: E402
from ave_planner.model import estimate  # noqa: E402
from ave_planner.optimize import optimize  # noqa: E402
from ave_planner.policy import BanditPlanner, History  # noqa: E402
from ave_planner.preconditions import applicable  # noqa: E402
from ave_planner.rewrites import AttnRecipe, Candidate, recognise  # noqa: E402

import ave_decl  # noqa: E402
from ave_decl.datalog.souffle_engine import find_souffle  # noqa: E402
from ave_decl.transform.attention_templates import AttnSpec, render_attention_ladder  # noqa: E402

KB = load_knowledge()
NAIVE = EXAMPLES / "attention" / "attention_naive.ave"
CAUSAL = EXAMPLES / "attention" / "attention_naive_causal.ave"
SIZES, GATE = {"H": 32, "S": 4096}, {"H": 1, "S": 128}
SETTINGS = Settings("amdgpu", "mi300x", SIZES, GATE, measure=False)
ATTENTION = {"online_softmax", "stage_kv", "transpose_v", "causal_skip"}
MFMA = AttnSpec(online=True, instruction="32x32x8")
STAGED = dataclasses.replace(MFMA, staged=True, waves=2, pad=4)


def _cand(spec: AttnSpec) -> Candidate:
    return Candidate(render_attention_ladder(spec), AttnRecipe(spec))


def test_the_attention_techniques_are_in_the_knowledge_base_with_their_schema():
    assert ATTENTION <= set(KB)
    for tid in ATTENTION:
        t = KB[tid]
        assert t.family == "attention" and t.must_prove and t.lowers and "amdgpu" in t.targets, t
    assert KB["matrix_instructions"].family == KB["pad_shared"].family == "recipe"


def test_the_examples_are_the_ladders_first_step_and_verify():
    for path, causal in ((NAIVE, False), (CAUSAL, True)):
        text = path.read_text()
        recipe = recognise(text, str(path))
        assert isinstance(recipe, AttnRecipe) and recipe.spec.causal == causal and not recipe.spec.online
        assert text.endswith(recipe.render())  # the example is the rendered naive step, after its comment
        (k,) = ave_decl.check(text, path=str(path), violation_sets=False).kernels
        assert k.verdict.value == "VERIFIED"


EXPECTED = {  # kernel -> the attention-related techniques whose precondition holds
    "naive": (NAIVE.read_text(), {"online_softmax", "matrix_instructions"}),
    "causal": (CAUSAL.read_text(), {"online_softmax", "matrix_instructions", "causal_skip"}),
    "mfma": (render_attention_ladder(MFMA), {"stage_kv", "pad_shared"}),
    "staged": (render_attention_ladder(STAGED), {"transpose_v", "pad_shared"}),
    "causal_skipped": (render_attention_ladder(dataclasses.replace(STAGED, causal=True, skip=True)),
                       {"transpose_v", "pad_shared"}),
}
ENGINES = ["embedded", pytest.param("souffle", marks=pytest.mark.skipif(
    find_souffle() is None, reason="souffle is not installed (PATH or AVE_SOUFFLE)"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_attention_preconditions_on_each_engine(engine, name):
    text, expected = EXPECTED[name]
    held = applicable(text, list(KB.values()), engine, f"{name}.ave")
    assert held & (ATTENTION | {"matrix_instructions", "pad_shared"}) == expected, held


SLOW = pytest.mark.slow  # a matrix-instruction kernel on the host: over 10 s each on 2 cores


@pytest.mark.parametrize("tid, spec, params", [
    ("causal_skip", AttnSpec(causal=True), {}),
    pytest.param("stage_kv", MFMA, {"waves": 4}, marks=SLOW),
    pytest.param("stage_kv", MFMA, {"waves": 2}, marks=SLOW),
    pytest.param("transpose_v", STAGED, {}, marks=SLOW),
    pytest.param("causal_skip", dataclasses.replace(STAGED, causal=True), {}, marks=SLOW),
])
def test_an_attention_technique_applied_where_it_holds_is_verified_and_host_correct(tid, spec, params):
    start = _cand(spec)
    assert tid in applicable(start.text, list(KB.values()))
    out = run_episode(1, start, estimate(start.text, SIZES, "mi300x"), KB[tid], params, SETTINGS)
    # every correctness gate passed: accepted, or refused only by the model (no estimated gain)
    assert out.episode.outcome == "accepted" or out.episode.gate == "model", (out.episode.gate, out.episode.reason)
    assert out.episode.estimate_s is not None and out.candidate is not None and out.candidate.text != start.text


@pytest.mark.parametrize("device", ["mi300x", "h200"])
def test_the_model_ranks_the_attention_ladder(device):
    """two-pass naive > online softmax > matrix instructions > padded > K/V staged for 4 waves >
    V transposed; causal: skipping the masked tiles beats computing them."""
    ladder = [AttnSpec(), AttnSpec(online=True), MFMA, dataclasses.replace(MFMA, pad=4),
              dataclasses.replace(MFMA, pad=4, staged=True, waves=4),
              dataclasses.replace(MFMA, pad=4, staged=True, waves=4, v_transposed=True)]
    times = [estimate(render_attention_ladder(s), SIZES, device).seconds for s in ladder]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times), times
    for spec in (AttnSpec(causal=True), dataclasses.replace(STAGED, causal=True)):
        full = estimate(render_attention_ladder(spec), SIZES, device).seconds
        skipped = estimate(render_attention_ladder(dataclasses.replace(spec, skip=True)), SIZES, device).seconds
        assert skipped < 0.7 * full, (spec, skipped, full)


def test_optimizing_the_naive_attention_accepts_three_techniques(tmp_path):
    """Three episodes from examples/attention/attention_naive.ave on amdgpu: online softmax, matrix
    instructions and padding, each accepted only after passing every gate (VERIFIED with its
    invariants proved, the host output equal to the reference, a lower estimate)."""
    text = NAIVE.read_text()
    result = optimize(text, str(NAIVE), KB, BanditPlanner(), SETTINGS, 3, History(None), tmp_path / "out")
    accepted = [e.technique for e in result.episodes if e.outcome == "accepted"]
    assert len(accepted) >= 3 and {"online_softmax", "matrix_instructions"} <= set(accepted), result.episodes
    assert result.best_estimate.seconds < result.start_estimate.seconds / 1.5
    best = (tmp_path / "out" / "best.ave").read_text()
    (run,) = ave_decl.run(best, sizes=GATE, path="best.ave")
    assert run.ok


@SLOW
def test_a_wrong_transposition_of_v_is_rejected_with_a_replayed_counterexample(tmp_path):
    """bench/planner_broken.py's attention case: V staged transposed but read as if it were not;
    rejected at `check` by ave/mma-k-pairing, the counterexample confirmed by the simulator."""
    import sys

    sys.path.insert(0, str(EXAMPLES.parent / "bench"))
    from planner_broken import STAGED_ATTENTION, transpose_v_read_untransposed

    from ave_planner.rewrites import REWRITES

    text = render_attention_ladder(STAGED_ATTENTION)
    rewrites = {**REWRITES, "broken": transpose_v_read_untransposed}
    d = tmp_path / "kb"
    d.mkdir()
    src = (EXAMPLES.parent / "planner" / "knowledge" / "transpose_v.toml").read_text()
    (d / "transpose_v.toml").write_text(src.replace('rewrite = "transpose_v"', 'rewrite = "broken"'))
    kb = load_knowledge(d, rewrites)
    result = optimize(text, "staged.ave", kb, BanditPlanner(), SETTINGS, 1, History(None), rewrites=rewrites)
    (ep,) = result.episodes
    assert (ep.outcome, ep.gate) == ("rejected", "check") and "ave/mma-k-pairing" in ep.reason, ep
    assert ep.counterexample["replay"]["confirmed"] and result.best.text == text
