"""The planner (issue 14): the knowledge base's schema and its precondition queries, the episode
gates (a broken rewrite is never accepted), the performance model's ranking of the GEMM ladder,
and `ave optimize` end to end on the host (no GPU)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")

from ave_planner.episode import Settings, run_episode  # noqa: E402
from ave_planner.errors import KnowledgeError  # noqa: E402
from ave_planner.knowledge import knowledge_dir, load_knowledge  # noqa: E402
from ave_planner.model import estimate  # noqa: E402
from ave_planner.optimize import optimize  # noqa: E402
from ave_planner.policy import BanditPlanner, History  # noqa: E402
from ave_planner.preconditions import applicable  # noqa: E402
from ave_planner.rewrites import REWRITES, _ast  # noqa: E402

import ave_decl  # noqa: E402
from ave_decl.datalog.souffle_engine import find_souffle  # noqa: E402
from ave_decl.transform.catalogue import xor_swizzle_writes_only  # noqa: E402
from ave_decl.transform.gemm_templates import GemmSpec, render  # noqa: E402

KB = load_knowledge()
LDS = EXAMPLES / "gemm_lds_mfma.ave"
SETTINGS = Settings("amdgpu", "mi300x", {"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 128, "K": 192})


def test_the_knowledge_base_has_the_ladder_techniques_and_every_entry_is_complete():
    assert {"shared_staging", "matrix_instructions", "vector_copies", "swizzle_shared", "pad_shared", "pipeline",
            "retile", "split_k", "register_prefetch"} <= set(KB)
    invariants = ave_decl.invariants()
    for t in KB.values():
        assert t.description.strip() and t.title and t.rewrite in REWRITES
        assert all(r in invariants for r in t.must_prove) and t.must_prove
        assert t.id in t.prompt("amdgpu") and t.lowers


EXPECTED = {  # kernel -> the techniques whose precondition holds
    "gemm_naive.ave": {"shared_staging"},
    "gemm_lds_mfma.ave": {"pad_shared", "pipeline", "retile", "swizzle_shared", "split_k", "register_prefetch"},
    "gemm_pipelined.ave": {"pad_shared", "retile", "swizzle_shared", "vector_copies"},
}
ENGINES = ["embedded", pytest.param("souffle", marks=pytest.mark.skipif(
    find_souffle() is None, reason="souffle is not installed (PATH or AVE_SOUFFLE)"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_precondition_is_a_datalog_query_answered_by_each_engine(engine, name):
    path = EXAMPLES / name
    assert applicable(path.read_text(), list(KB.values()), engine, str(path)) == EXPECTED[name]


def _kb_with(tmp_path: Path, name: str, edit) -> Path:
    d = tmp_path / "kb"
    d.mkdir(exist_ok=True)
    src = (knowledge_dir() / f"{name}.toml").read_text()
    (d / f"{name}.toml").write_text(edit(src))
    return d


@pytest.mark.parametrize("edit, at, words", [
    (lambda s: s.replace('rewrite = "pipeline"', 'rewrite = "pipeline"\ncolour = "blue"'), "colour =",
     "unknown field 'colour'"),
    (lambda s: s.replace('rewrite = "pipeline"', 'rewrite = "pipelin"'), 'rewrite = "pipelin"',
     "unknown rewrite 'pipelin'"),
    (lambda s: s.replace('"ave/async-copy-wait"', '"ave/async-copy-wiat"'), None, "unknown invariant"),
    (lambda s: s.replace("stages = [2, 3]", "stages = []"), None, "parameter 'stages'"),
    (lambda s: s.replace('title = ', 'title = = '), "title = =", "not valid TOML"),
    (lambda s: s.replace('id = "pipeline"', 'id = "pipes"'), 'id = "pipes"', "is not the file's name"),
    (lambda s: s.replace("lowers = [", 'lowers = ["latency", '), None, "unknown model term 'latency'"),
])
def test_a_bad_knowledge_file_is_one_located_error(tmp_path, edit, at, words):
    """`at`: the text of the line the error must point at (None: only the file is checked)."""
    d = _kb_with(tmp_path, "pipeline", edit)
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(d)
    one = err.value.one_line()
    assert one.startswith(str(d / "pipeline.toml") + ":") and words in one and "\n" not in one, one
    if at is not None:
        lines = (d / "pipeline.toml").read_text().splitlines()
        assert at in lines[err.value.line - 1], one


def test_a_precondition_syntax_error_points_into_the_toml_file(tmp_path):
    d = _kb_with(tmp_path, "retile", lambda s: s.replace("pre_retile(k) :- buffer", "pre_retile(k) :- buffer buffer"))
    (t,) = load_knowledge(d).values()
    with pytest.raises(KnowledgeError) as err:
        applicable(LDS.read_text(), [t], "embedded", str(LDS))
    text = (d / "retile.toml").read_text().splitlines()
    assert err.value.path == str(d / "retile.toml")
    assert "buffer buffer" in text[err.value.line - 1], err.value.one_line()


def test_ave_optimize_reports_a_bad_knowledge_base_with_exit_4(ave, tmp_path):
    d = _kb_with(tmp_path, "pipeline", lambda s: s.replace('rewrite = "pipeline"', 'rewrite = "nope"'))
    r = ave("optimize", EXAMPLES / "gemm_naive.ave", "--knowledge", d, "--budget", "1")
    assert r.code == 4 and "unknown rewrite 'nope'" in r.err and "Traceback" not in r.out + r.err


def test_the_llm_planner_without_an_endpoint_is_a_usage_error(ave, monkeypatch):
    """No key and no local server: one line and exit 2 before any episode (it was exit 70, the
    client's "Missing credentials" reported as an internal error)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AVE_LLM_BASE_URL", raising=False)
    r = ave("optimize", EXAMPLES / "gemm_naive.ave", "--planner", "llm", "--budget", "1")
    assert r.code == 2 and "needs an endpoint" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_kernel_that_does_not_verify_is_not_optimized(ave):
    r = ave("optimize", EXAMPLES / "gemm_lds_mfma_transposed.ave", "--budget", "1")
    assert r.code == 3 and "must be one kernel that ave check says is VERIFIED" in r.err


def _broken_kb(tmp_path: Path) -> tuple[dict, dict]:
    """A test-only technique whose rewrite swizzles the shared stores but not the loads."""
    d = _kb_with(tmp_path, "swizzle_shared", lambda s: s.replace('rewrite = "swizzle_shared"',
                                                                 'rewrite = "swizzle_writes_only"'))
    rewrites = {**REWRITES, "swizzle_writes_only": lambda c, p: _ast(c, xor_swizzle_writes_only)}
    return load_knowledge(d, rewrites), rewrites


def test_the_planner_never_accepts_a_kernel_that_fails_a_gate(tmp_path):
    kb, rewrites = _broken_kb(tmp_path)
    text = LDS.read_text()
    result = optimize(text, str(LDS), kb, BanditPlanner(), SETTINGS, 1, History(None), tmp_path / "out",
                      rewrites=rewrites)
    (ep,) = result.episodes
    assert ep.outcome == "rejected" and ep.gate == "check" and ep.reason.startswith("VIOLATION"), ep
    assert ep.counterexample and ep.counterexample["replay"]["confirmed"], ep.counterexample
    assert result.best.text == text
    assert (tmp_path / "out" / "best.ave").read_text() == text
    record = json.loads((tmp_path / "out" / "trajectory.json").read_text())
    assert [e["outcome"] for e in record["episodes"]] == ["rejected"]


def test_a_rewrite_that_omits_its_invariant_template_is_rejected(tmp_path):
    d = _kb_with(tmp_path, "retile", lambda s: s.replace("templates = []",
                                                         'templates = ["assert_tag(a, b, lambda x, y: x[1] == y[0])"]'))
    kb = load_knowledge(d)
    spec = GemmSpec(2, 2, 16, copy_width=1)
    from ave_planner.rewrites import Candidate, Recipe

    start = Candidate(Recipe(spec).render(), Recipe(spec))
    before = estimate(start.text, SETTINGS.sizes, SETTINGS.device)
    out = run_episode(1, start, before, kb["retile"], {"waves_m": 2, "waves_n": 2, "k_tile": 32}, SETTINGS)
    assert (out.episode.outcome, out.episode.gate) == ("rejected", "templates"), out.episode


@pytest.mark.parametrize("device", ["mi300x", "h200"])
def test_the_model_ranks_the_gemm_ladder(device):
    """naive > shared-memory staging > matrix instructions > pipelined, at a production size."""
    sizes = {"M": 4096, "N": 4096, "K": 4096}
    ladder = [(EXAMPLES / "gemm_naive.ave").read_text(),
              render(GemmSpec(2, 2, 16, copy_width=1, instruction="fma", input_dtype="f32")),
              LDS.read_text(), (EXAMPLES / "gemm_pipelined.ave").read_text()]
    times = [estimate(t, sizes, device).seconds for t in ladder]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4, times


@pytest.mark.parametrize("device", ["mi300x", "h200"])
def test_split_k_pays_only_where_the_grid_cannot_fill_the_device(device):
    """At 4096^3 the grid fills every unit and split-K only adds its reduction; at M = N = 256
    with a long K one block per unit leaves memory latency exposed, and twice the waves hide it."""
    plain, split = GemmSpec(2, 2, 16, copy_width=1), GemmSpec(2, 2, 16, copy_width=1, split_k=2)
    big, small = {"M": 4096, "N": 4096, "K": 4096}, {"M": 256, "N": 256, "K": 16384}
    assert estimate(render(split), big, device).seconds > estimate(render(plain), big, device).seconds
    assert estimate(render(split), small, device).seconds < 0.95 * estimate(render(plain), small, device).seconds


def test_split_k_is_verified_and_host_correct_on_a_staged_gemm():
    from ave_planner.rewrites import Candidate, Recipe

    spec = GemmSpec(2, 2, 16, copy_width=1, input_dtype="f32")
    start = Candidate(Recipe(spec).render(), Recipe(spec))
    s = Settings("amdgpu", "mi300x", {"M": 256, "N": 256, "K": 16384}, SETTINGS.gate_sizes, measure=False)
    out = run_episode(1, start, estimate(start.text, s.sizes, s.device, True), KB["split_k"], {"split": 2}, s)
    assert out.episode.outcome == "accepted", (out.episode.gate, out.episode.reason)
    assert "if g == 1:" in out.candidate.text


def test_register_prefetch_is_verified_host_correct_and_overlaps_memory_with_compute():
    from ave_planner.rewrites import Candidate, Recipe

    spec = GemmSpec(2, 2, 16, copy_width=1, input_dtype="f32")
    start = Candidate(Recipe(spec).render(), Recipe(spec))
    out = run_episode(1, start, estimate(start.text, SETTINGS.sizes, SETTINGS.device), KB["register_prefetch"], {},
                      Settings("amdgpu", "mi300x", SETTINGS.sizes, SETTINGS.gate_sizes, measure=False))
    assert out.episode.outcome == "accepted", (out.episode.gate, out.episode.reason)
    assert out.estimate.overlapped and "kn = (kt + 16) % K" in out.candidate.text


def test_the_model_sees_coalescing_and_bank_conflicts():
    """With thread ids swapped, the naive GEMM's lanes walk down columns of A and B (a sector
    each) instead of along rows; a swizzled shared tile spreads the lanes over the banks."""
    naive = (EXAMPLES / "gemm_naive.ave").read_text()
    transposed = naive.replace("thread_id(1)", "THREAD_X").replace("thread_id(0)", "thread_id(1)") \
        .replace("THREAD_X", "thread_id(0)")
    sizes = {"M": 1024, "N": 1024, "K": 1024}
    assert estimate(transposed, sizes, "mi300x").terms["l2"] > 1.5 * estimate(naive, sizes, "mi300x").terms["l2"]
    coalesced = render(GemmSpec(2, 2, 32, copy_width=1))
    plain = estimate(coalesced, sizes, "mi300x").terms["lds"]
    swizzled = render(GemmSpec(2, 2, 32, copy_width=1, swizzle_a=(3, 1, 4)))
    padded = render(GemmSpec(2, 2, 32, copy_width=1, pad=8))
    assert estimate(swizzled, sizes, "mi300x").terms["lds"] < plain
    assert estimate(padded, sizes, "mi300x").terms["lds"] < plain


def test_history_is_read_back_and_bad_lines_are_skipped(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History(path)
    h.add({"technique": "pipeline", "params": {"stages": 2}, "outcome": "accepted", "speedup": 2.0})
    with path.open("a") as f:
        f.write("not json\n{\"technique\": 3}\n")
    again = History(path)
    assert [e["technique"] for e in again.episodes] == ["pipeline"]


def test_ave_optimize_reaches_a_verified_faster_gemm_on_the_host(ave, tmp_path):
    out = tmp_path / "run"
    r = ave("optimize", EXAMPLES / "gemm_naive.ave", "--budget", "3", "--out", out)
    assert r.code == 0, r.out + r.err
    record = json.loads((out / "trajectory.json").read_text())
    accepted = [e for e in record["episodes"] if e["outcome"] == "accepted"]
    assert [e["technique"] for e in accepted][:2] == ["shared_staging", "matrix_instructions"], record
    assert record["best_estimate_s"] < record["start_estimate_s"]
    best = (out / "best.ave").read_text()
    (k,) = ave_decl.check(best, path="best.ave", violation_sets=False).kernels
    assert k.verdict.value == "VERIFIED"
    (run,) = ave_decl.run(best, sizes={"M": 128, "N": 128, "K": 192}, path="best.ave")
    assert run.ok
    assert "episode  technique" in r.out and "best:" in r.out
    for e in record["episodes"]:
        d = out / f"episode-{e['index']:02d}-{e['technique']}"
        assert (d / "episode.json").is_file() and (d / "kernel.ave").is_file()
    shutil.rmtree(out)


def test_bad_inputs_are_one_line_errors_with_their_exit_codes(ave, tmp_path):
    broken = tmp_path / "broken.ave"
    broken.write_text("@kernel(grid=(1,), block=64, wave=64)\ndef k(A: Tensor[f32, (64,)]):\n    A[0] = nope\n")
    r = ave("optimize", broken, "--budget", "1")
    assert r.code == 3 and r.err.startswith(str(broken)) and "Traceback" not in r.err, r.err
    r = ave("optimize", EXAMPLES / "fused_moe.ave", "--budget", "1")
    assert r.code == 2 and "EM has no value" in r.err and r.err.count("\n") == 1, r.err
    r = ave("optimize", EXAMPLES / "gemm_naive.ave", "--sizes", "M=0")
    assert r.code == 2 and "NAME=POSITIVE_INT" in r.err


def test_a_second_run_starts_from_what_worked_in_the_history(tmp_path):
    """With no history the knowledge base's order decides; an earlier run's accepted arm (from any
    kernel) is tried first, and a technique whose arms were all rejected gives way."""
    from ave_planner.policy import arm_key

    techniques = [KB["pipeline"], KB["retile"], KB["pad_shared"]]
    fresh = BanditPlanner().choose(techniques, set(), History(None), "amdgpu")
    assert (fresh[0].id, fresh[1]) == ("pipeline", {"stages": 2})
    h = History(tmp_path / "h.jsonl")
    h.add({"technique": "retile", "params": {"waves_m": 4, "waves_n": 2, "k_tile": 32}, "outcome": "accepted",
           "speedup": 1.8})
    for stages in (2, 3):
        h.add({"technique": "pipeline", "params": {"stages": stages}, "outcome": "rejected"})
    t, p = BanditPlanner().choose(techniques, set(), History(tmp_path / "h.jsonl"), "amdgpu")
    assert (t.id, p) == ("retile", {"waves_m": 4, "waves_n": 2, "k_tile": 32})
    tried = {arm_key("retile", p)}
    t2, _ = BanditPlanner().choose(techniques, tried, History(tmp_path / "h.jsonl"), "amdgpu")
    assert t2.id != "pipeline"


def test_the_llm_planner_falls_back_to_the_bandit_without_an_endpoint(monkeypatch):
    """An endpoint that refuses the connection: the bandit's choice (without the `openai`
    package the LLM planner is the bandit by construction, so the test needs it)."""
    pytest.importorskip("openai", reason="the llm extra (openai) is not installed")
    from ave_planner.policy import LLMPlanner

    monkeypatch.setenv("AVE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    techniques = [KB["pipeline"], KB["retile"]]
    expected = BanditPlanner().choose(techniques, set(), History(None), "amdgpu")
    got = LLMPlanner().choose(techniques, set(), History(None), "amdgpu")
    assert (got[0].id, got[1]) == (expected[0].id, expected[1])


def _with_rewrite(tmp_path: Path, name: str, fn):
    d = _kb_with(tmp_path, "pipeline", lambda s: s.replace('rewrite = "pipeline"', f'rewrite = "{name}"'))
    rewrites = {**REWRITES, name: fn}
    return load_knowledge(d, rewrites), rewrites


@pytest.mark.parametrize("scale, tolerance, gate", [(1.05, 0.1, "tolerance"), (2.0, None, "run")])
def test_a_wrong_output_is_rejected_even_when_the_candidate_loosens_its_tolerance(tmp_path, scale, tolerance, gate):
    """A candidate may not declare a looser reference tolerance than the kernel it starts from
    (unless its technique states that precision loss): else a 5 % error would pass the run gate."""
    from ave_planner.rewrites import Candidate, pipeline

    def wrong(c, p):
        out = pipeline(c, p)
        text = out.text.replace("] = acc[r]", f"] = acc[r] * {scale}")
        if tolerance:
            text = text.replace('reference="C = A @ B"', f'reference="C = A @ B", tolerance={tolerance}')
        return Candidate(text, None)

    kb, rewrites = _with_rewrite(tmp_path, "wrong_output", wrong)
    s = Settings("amdgpu", "mi300x", SETTINGS.sizes, SETTINGS.gate_sizes, measure=False)
    result = optimize(LDS.read_text(), str(LDS), kb, BanditPlanner(), s, 1, History(None), rewrites=rewrites)
    assert [(e.outcome, e.gate) for e in result.episodes] == [("rejected", gate)], result.episodes


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace("stages = [2, 3]", "depth = [2, 3]"), "unknown parameter 'depth'"),
    (lambda s: s.replace("stages = [2, 3]", "stages = [2, 99999999999999999999]"), "is not one of 2, 3"),
    (lambda s: s.replace("stages = [2, 3]", 'stages = ["2"]'), "is not one of 2, 3"),
    (lambda s: s.replace("stages = [2, 3]", "stages = { amdgpu = [2] }"), "one for each target"),
    (lambda s: "parameters = 3\n" + s.replace("[parameters]\nstages = [2, 3]", ""), "must be a table"),
    (lambda s: s.replace("rules = '''", "rules = '''\n#include \"/etc/passwd\""), "no #include"),
])
def test_parameters_are_checked_against_what_the_rewrite_accepts(tmp_path, edit, words):
    d = _kb_with(tmp_path, "pipeline", edit)
    with pytest.raises(KnowledgeError) as err:
        load_knowledge(d)
    assert words in err.value.one_line() and err.value.line is not None, err.value.one_line()


def test_a_precondition_relation_declared_only_in_a_comment_is_a_knowledge_error(tmp_path):
    def comment_out(s: str) -> str:
        return s.replace(".decl pre_retile(k:Kernel)\n", "// .decl pre_retile(k:Kernel)\n") \
            .replace("pre_retile(k) :- ", "other_retile(k) :- ")

    d = _kb_with(tmp_path, "retile", comment_out)
    (t,) = load_knowledge(d).values()
    with pytest.raises(KnowledgeError) as err:
        applicable(LDS.read_text(), [t], "embedded", str(LDS))
    assert err.value.path == str(d / "retile.toml"), err.value.one_line()
