"""Wave specialization: `if wave_id() < 4:` arms that meet at barriers (ave/barrier-divergence),
run at once by the simulator, and flows from one arm's stores into the other arm's loads followed
by barrier interval (solver/cross_arm.py); outside what that module states they stay UNKNOWN."""
from __future__ import annotations

import pytest
from conftest import DATA, EXAMPLES

import ave_decl
from ave_decl.report.model import Verdict
from ave_decl.testing.mutate import OPERATORS

MATCHED = EXAMPLES / "specialized" / "producer_consumer.ave"
ONE_ARM = DATA / "specialized" / "one_arm_barrier.ave"


def _findings(report, invariant=None, line=None):
    (k,) = report.kernels
    return [f for f in k.findings if f.severity == "error" and (invariant is None or f.invariant == invariant)
            and (line is None or f.location.line == line)]


def test_matched_arms_verify_their_barriers_and_the_flow_across_the_arms():
    report = ave_decl.check(MATCHED)
    (k,) = report.kernels
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.reason) for f in k.findings]
    # the `if` (line 17) and its two loops (their trip counts are the same for every thread)
    assert {f.verdict for f in _findings(report, "ave/barrier-divergence")} == {Verdict.VERIFIED}
    assert len(_findings(report, "ave/barrier-divergence", line=17)) == 1
    # races across the arms are checked by barrier interval: the stages are refilled after the reads
    assert {f.verdict for f in _findings(report, "ave/shared-race")} == {Verdict.VERIFIED}
    # the consumer's value is the producer's element (through the stage it filled one interval
    # earlier), and the guard `w < 4` selects threads: the consumers' stores cover C once
    for inv in ("ave/epilogue-placement", "ave/output-coverage"):
        assert {f.verdict for f in _findings(report, inv, line=25)} == {Verdict.VERIFIED}, inv


_PRODUCER = "S[it % 2, t] = A[base + it * 256 + t]"


@pytest.mark.parametrize("wrong", [
    "S[(it + 1) % 2, t] = A[base + it * 256 + t]",  # the producer fills the other stage
    "S[it % 2, t] = A[base + it * 256 + (t + 1) % 256]",  # the producer stages the wrong element
])
def test_a_wrong_producer_is_a_replayed_violation_naming_both_threads(wrong):
    text = MATCHED.read_text().replace(_PRODUCER, wrong)
    (f,) = [f for f in _findings(ave_decl.check(text, path="m.ave", confirm=True), "ave/epilogue-placement")]
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"], (f.message, f.replay)
    steps = f.counterexample.lhs.chain
    load = next(p for p in steps if p.kind == "load")
    store = next(p for p in steps if p.kind == "store")
    assert (load.location.line, store.location.line) == (25, 19)
    assert load.thread >= 256 and store.thread < 256  # a consumer reads what a producer stored
    assert load.iterations and store.iterations and "the other arm" in store.note


def test_a_read_no_producer_wrote_yet_is_a_replayed_violation():
    """The consumers read before the producers' first store: the element holds no tagged value."""
    text = """@kernel(grid=(N // 256,), block=512, wave=64, reference="C = A")
def early(A: Tensor[f32, (N,)], C: Tensor[f32, (N,)]):
    assume(N % 256 == 0)
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
    base = block_id(0) * 256
    S = shared(f32, (2, 256))
    if wave_id() < 4:
        syncthreads()
        S[0, t] = A[base + t]
        syncthreads()
    else:
        C[base + t % 256] = S[0, t % 256]
        syncthreads()
        syncthreads()
"""
    (f,) = _findings(ave_decl.check(text, path="early.ave", confirm=True), "ave/epilogue-placement")
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"], (f.message, f.replay)
    assert "untagged" in f.message and "no store of the other arm wrote" in f.counterexample.lhs.chain[-1].note


def test_a_flow_outside_the_stated_form_stays_unknown():
    """A producer store under a condition on the loop does not fill a whole stage per iteration:
    the flow is not followed, and what the consumer stores is UNKNOWN, never VERIFIED."""
    guarded = "            if it < 3:\n                " + _PRODUCER
    text = MATCHED.read_text().replace("            " + _PRODUCER, guarded)
    assert text != MATCHED.read_text()
    (f,) = _findings(ave_decl.check(text, path="m.ave"), "ave/epilogue-placement")
    assert f.verdict == Verdict.UNKNOWN and "does not write a whole slice" in f.reason, f.reason


@pytest.mark.parametrize("in_loop, words", [
    # the flow is followed (the chains), but the rules' structural check on the untagged value is not
    (False, "a flow this structural check does not follow"),
    # the `if` runs in a loop: cross_arm.py's own reason, not a generic "not followed yet"
    (True, "a flow the verifier does not follow here: a store on the load's own path reaches it too"),
])
def test_an_untagged_value_across_the_arms_is_unknown_with_the_reason(in_loop, words):
    text = MATCHED.read_text().replace(_PRODUCER, "S[it % 2, t] = 1.0")
    if in_loop:
        text = text.replace("    if w < 4:\n", "    for rep in range(2):\n      if w < 4:\n").replace(
            "\n    else:\n", "\n      else:\n")
    (f,) = [f for f in _findings(ave_decl.check(text, path="m.ave"), "ave/epilogue-placement")
            if f.verdict != Verdict.VERIFIED]
    assert f.verdict == Verdict.UNKNOWN and words in f.reason and "not followed yet" not in f.reason, f.reason
    assert "the stored value has no tagged source" in f.reason


def test_consumers_that_write_one_element_twice_are_a_coverage_violation():
    text = MATCHED.read_text().replace("C[base + it * 256 + t % 256]", "C[base + it * 256 + t % 128]")
    found = _findings(ave_decl.check(text, path="m.ave", confirm=True), "ave/output-coverage")
    bad = [f for f in found if f.verdict == Verdict.VIOLATION]
    assert bad and bad[0].replay["confirmed"], [(f.verdict, f.message) for f in found]


def test_the_simulator_runs_the_arms_at_once(ave):
    """Arms meet at each barrier: the consumer reads each stage the round the producer filled it."""
    r = ave("simulate", MATCHED)
    assert r.code == 0, r.out
    assert "the output matches the reference" in r.out and "shadow [ave/barrier-divergence] line 17: ok" in r.out
    stale = MATCHED.read_text().replace("S[it % 2, t % 256]", "S[(it + 1) % 2, t % 256]")
    r = ave("simulate", _write(stale))
    assert r.code == 1 and "the output differs from the reference" in r.out


def _write(text: str, name: str = "k.ave"):
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp())
    p = d / name
    p.write_text(text)
    return p


def test_the_code_generator_compiles_matched_arms_only_with_the_proof(ave):
    """A barrier under `if w < 4` hangs the block unless every wave reaches it: without the
    verifier's ave/barrier-divergence proof the lowering refuses it (exit 6); --unverified still
    runs that one proof, so the example runs and matches, and the one-arm bug does not; verified,
    it runs without the flag too."""
    from codegen_support import run_on

    from ave_decl.codegen import CodegenError

    with pytest.raises(CodegenError) as err:
        run_on("host", MATCHED, {"N": 1024})
    assert "differs between warps/waves" in err.value.message and "ave/barrier-divergence" in err.value.message
    assert err.value.span.line == 20
    r = ave("run", MATCHED, "--unverified")
    assert r.code == 0 and "ok        producer_consumer" in r.out, r.out + r.err
    assert "(verifier: unchecked (ave/barrier-divergence proven))" in r.out
    r = ave("run", ONE_ARM, "--unverified")
    assert r.code == 6 and "compiles only when the verifier proves ave/barrier-divergence" in r.err, r.err
    r = ave("run", MATCHED)
    assert r.code == 0 and "ok        producer_consumer" in r.out, r.out + r.err


def test_a_barrier_in_one_arm_only_is_a_replayed_violation():
    assert ONE_ARM.read_text().count("syncthreads()") == MATCHED.read_text().count("syncthreads()") - 1
    (f,) = [f for f in _findings(ave_decl.check(ONE_ARM, confirm=True), "ave/barrier-divergence")
            if f.verdict != Verdict.VERIFIED]
    assert f.verdict == Verdict.VIOLATION and f.location.line == 13
    assert f.replay["confirmed"], f.replay
    c = f.counterexample
    assert (c.lhs.tag, c.rhs.tag) == ([8], [4])
    assert c.lhs.chain[0].kind == "branch" and [p.kind for p in c.lhs.chain[1:]] == ["barrier", "barrier"]
    assert [p.note for p in c.rhs.chain[1:]] == ["reached 4 time(s)"]
    assert "reaches 8 barrier(s)" in f.message and "reaches 4" in f.message


def test_a_read_in_the_producers_interval_is_a_replayed_race():
    """The consumer reads a stage before meeting the producer at the barrier: same interval."""
    read = "            C[base + it * 256 + t % 256] = S[it % 2, t % 256]\n"
    bar = "            syncthreads()\n"
    text = MATCHED.read_text().replace(bar + read + bar, read + bar + bar)
    assert text != MATCHED.read_text()
    races = [f for f in _findings(ave_decl.check(text, path="race.ave", confirm=True), "ave/shared-race")
             if f.verdict == Verdict.VIOLATION]
    assert races and races[0].replay["confirmed"], races
    assert races[0].counterexample.instruction["interval"] == 0 and "the same barrier interval" in races[0].message


def test_the_mutation_operator_makes_that_bug():
    (m, *_) = OPERATORS["barrier_one_arm"](MATCHED.read_text())
    assert m.line == 24
    found = _findings(ave_decl.check(m.text, path="m.ave"), "ave/barrier-divergence")
    assert [f.verdict for f in found if f.location.line == 17] == [Verdict.VIOLATION]


_KERNEL = """@kernel(grid=(4,), block=128, wave=64)
def k(A: Tensor[f32, (128,)], C: Tensor[f32, (128,)]):
    tag(A, lambda i: (i,), "A")
    tag(C, lambda i: (i,), "C")
    t = thread_id(0)
{body}
    C[t] = A[t]
"""


@pytest.mark.parametrize("body, verdict, words", [
    # a condition on the block: every thread of a block takes the same arm
    ("    if block_id(0) == 0:\n        syncthreads()\n", Verdict.VERIFIED, ""),
    # the same count in both arms, through a loop and a nested uniform if
    ("    if wave_id() == 0:\n        for i in range(3):\n            syncthreads()\n    else:\n"
     "        syncthreads()\n        if block_id(0) >= 0:\n            syncthreads()\n            syncthreads()\n",
     Verdict.VERIFIED, ""),
    # a nested if that drops a barrier for some blocks
    ("    if wave_id() == 0:\n        syncthreads()\n    else:\n"
     "        if block_id(0) == 1:\n            syncthreads()\n", Verdict.VIOLATION, "reaches 1 barrier(s)"),
    # a trip count that depends on a loop inside the arm has no closed form: UNKNOWN
    ("    if wave_id() == 0:\n        for i in range(4):\n"
     "            for j in range(i):\n                syncthreads()\n", Verdict.UNKNOWN, "depends on a loop inside"),
])
def test_barrier_counts(body, verdict, words):
    found = _findings(ave_decl.check(_KERNEL.format(body=body), path="k.ave"), "ave/barrier-divergence")
    (f,) = [f for f in found if f.location.line == 6]  # the outer `if` (a nested one is its own site)
    assert f.verdict == verdict, (f.message, f.reason)
    assert words in f.message + f.reason


_COPY = "async_copy(S[it % 2, t], A[base + it * 256 + t])\n            async_wait()"


def test_a_copy_waited_for_before_the_barrier_is_followed_across_the_arms():
    """A full wait before the next barrier on every path: the copy has landed within its barrier
    interval, so it reaches the other arm (and races there) like a store."""
    report = ave_decl.check(MATCHED.read_text().replace(_PRODUCER, _COPY), path="m.ave")
    (k,) = report.kernels
    assert k.verdict == Verdict.VERIFIED, [(f.invariant, f.reason) for f in k.findings]
    wrong = MATCHED.read_text().replace(_PRODUCER, _COPY.replace("S[it % 2, t]", "S[(it + 1) % 2, t]"))
    (f,) = _findings(ave_decl.check(wrong, path="m.ave", confirm=True), "ave/epilogue-placement")
    assert f.verdict == Verdict.VIOLATION and f.replay["confirmed"], (f.message, f.replay)


def test_a_copy_not_waited_for_before_the_barrier_stays_unknown():
    """Without a wait the copy may land after the barrier: neither its flow nor its races across
    the arms are followed, and the kernel is UNKNOWN, never VERIFIED."""
    report = ave_decl.check(MATCHED.read_text().replace(_PRODUCER, _COPY.split("\n")[0]), path="m.ave")
    (k,) = report.kernels
    assert k.verdict == Verdict.UNKNOWN
    assert not [f for f in _findings(report) if f.verdict == Verdict.VIOLATION]
    (f,) = _findings(report, "ave/epilogue-placement")
    assert f.verdict == Verdict.UNKNOWN and "other arm" in f.reason, f.reason
    assert any("copies across the arms are not checked" in f.reason for f in _findings(report, "ave/shared-race"))


def test_a_waited_copy_read_in_its_own_interval_is_a_replayed_race():
    bar = "            syncthreads()\n"
    read = "            C[base + it * 256 + t % 256] = S[it % 2, t % 256]\n"
    text = MATCHED.read_text().replace(_PRODUCER, _COPY).replace(bar + read + bar, read + bar + bar)
    races = [f for f in _findings(ave_decl.check(text, path="m.ave", confirm=True), "ave/shared-race")
             if f.verdict == Verdict.VIOLATION]
    assert races and races[0].replay["confirmed"], races
