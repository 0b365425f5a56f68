"""A reduction's statistic drops the tag component it reduces over (`drops=`), not only the last:
the S^T flash-attention form, whose scores are tagged (head, key, query) and reduced over the key,
verifies, simulates to its reference, and its bugs are violations the simulator replays. A butterfly
step states its component on its shuffle: `fmax(x, shuffle_xor(x, m, drops=k))`."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA, EXAMPLES, checks_simulates_and_runs

import ave_decl
from ave_decl.lang import printer
from ave_decl.lang.parser import parse_text
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Verdict
from ave_decl.sim.run import simulate_source
from ave_decl.sim.statistics import matches_row, reduce_rows
from ave_decl.sim.state import ITYPE, LMAX

EXAMPLE = EXAMPLES / "attention" / "flash_attention_st.ave"
SCALE = "* 0.2550348616 - m_new)"


def test_the_drops_keyword_round_trips_through_the_printer():
    m = parse_text(EXAMPLE.read_text())
    text = printer.module(m)
    assert "reduce_max(s, drops=1)" in text and "reduce_sum(p, drops=1)" in text
    assert parse_text(text) == m


def test_the_st_form_verifies_and_simulates_to_its_reference(ave):
    (k,) = ave_decl.check(EXAMPLE).kernels
    assert k.verdict == Verdict.VERIFIED, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED]
    rows = [f for f in k.findings if f.invariant == "ave/row-statistics"]
    assert len(rows) >= 8 and all(f.verdict == Verdict.VERIFIED for f in rows)
    ((_, r),) = simulate_source(SourceFile(str(EXAMPLE), EXAMPLE.read_text()), {"H": 2, "S": 64})
    assert r.reference["ok"] and r.shadow_ok and not r.errors
    checked = {f.line for f in r.failures if f.invariant == "ave/row-statistics" and f.checked}
    assert {43, 44, 47, 48, 54} <= checked  # both reductions, the butterfly, P and the rescale of O^T


@pytest.mark.parametrize("old, new, line, words", [
    # the slots of a lane hold 16 keys of one query: dropping the last component (the query) is wrong
    ("reduce_max(s, drops=1)", "reduce_max(s)", 43, "the slot reduction mixes rows"),
    ("reduce_sum(p, drops=1)", "reduce_sum(p, drops=2)", 48, "the slot reduction mixes rows"),
    # lane ^ 16 holds another query's keys: two rows' maxima combined
    ("shuffle_xor(mt, 32)", "shuffle_xor(mt, 16)", 44, "statistics of two different rows"),
    # P of one query scaled by the neighbouring query's running max
    (SCALE, "* 0.2550348616 - shuffle_xor(m_new, 1))", 47, "the statistic of row"),
    # the reduction over the wrong lanes: a 64-lane group holds all 32 queries
    ("fmax(mt, shuffle_xor(mt, 32))", "lane_max(mt, 64)", 44, "the reduction mixes rows: lane 0"),
])
def test_a_statistic_of_the_wrong_row_is_a_replayed_violation(old, new, line, words):
    text = EXAMPLE.read_text()
    assert old in text
    text = text.replace(old, new)
    (k,) = ave_decl.check(text, path="bad.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    assert bad and all(f.invariant == "ave/row-statistics" for f in bad), [f.message for f in bad]
    first = min(bad, key=lambda f: f.location.line)
    assert first.location.line == line and words in first.message, first.message
    assert all(f.replay["confirmed"] for f in bad), [f.replay for f in bad]
    # the simulator's own shadow check fails at the same statement
    ((_, r),) = simulate_source(SourceFile("bad.ave", text), {"H": 1, "S": 32})
    assert any(f.invariant == "ave/row-statistics" and f.line == line and f.failed for f in r.failures)


def test_a_broadcast_message_names_the_values_row_without_the_dropped_component():
    """Scores are tagged (head, key, query) and the statistic dropped the key (drops=1): the row
    the message gives for the value is (head, query), not the prefix (head, key)."""
    text = EXAMPLE.read_text().replace(SCALE, "* 0.2550348616 - shuffle_xor(m_new, 1))")
    (k,) = ave_decl.check(text, path="bad.ave", violation_sets=False).kernels
    (f,) = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.location.line == 47]
    value, stat = f.counterexample.lhs.tag, f.counterexample.rhs.tag
    assert f.counterexample.instruction == {"dropped": 1}
    row = (value[0], value[2])
    assert f.message.endswith(f"(row {row})") and tuple(stat) != row, f.message


def _tags(*rows: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    tag = np.zeros((len(rows), LMAX), ITYPE)
    for i, r in enumerate(rows):
        tag[i, :len(r)] = r
    return tag, np.array([len(r) for r in rows], ITYPE)


def test_the_shadow_statistic_remembers_the_component_it_dropped():
    """(h, key, q) reduced over the key is the (h, q) row: it matches O^T (h, d, q), not
    (h, q, d), and a statistic of the same row that dropped the last component is another one."""
    tag, ar = _tags((1, 7, 3), (1, 3, 7))
    by_key, by_key_ar = reduce_rows(tag, ar, 1)
    assert by_key_ar.tolist() == [-2, -2] and by_key[0, :2].tolist() == [1, 3]
    full, full_ar = _tags((1, 5, 3), (1, 3, 5))
    assert matches_row(by_key[:1].repeat(2, 0), by_key_ar[:1].repeat(2), full, full_ar).tolist() == [True, False]
    last, last_ar = reduce_rows(*_tags((1, 3, 9)), -1)
    assert last[0, :2].tolist() == by_key[0, :2].tolist()
    assert not matches_row(last, last_ar, by_key[:1], by_key_ar[:1])[0]  # same row, other component
    again, again_ar = reduce_rows(by_key, by_key_ar, -1)  # a statistic reduced again stays itself
    assert (again == by_key).all() and (again_ar == by_key_ar).all()


BUTTERFLY = DATA / "lanes" / "butterfly_drops.ave"
STEP = "fmax(x, shuffle_xor(x, 32, drops=0))"


def test_a_butterfly_step_drops_the_component_its_shuffle_names(ave):
    """Lanes l and l ^ 32 hold keys 0 and 1 of one query, tagged (key, query): the step reduces over
    component 0, which `shuffle_xor(x, 32, drops=0)` states; check, simulate and run agree."""
    assert STEP in BUTTERFLY.read_text()
    checks_simulates_and_runs(ave, BUTTERFLY, "every shadow check passed")
    for same in ("x + shuffle_xor(x, 32, drops=0)", "fmin(shuffle_xor(x, 32, drops=0), x)"):
        (k,) = ave_decl.check(BUTTERFLY.read_text().replace(STEP, same), path="k.ave").kernels
        assert k.verdict == Verdict.VERIFIED, (same, [f.message for f in k.findings if f.verdict != Verdict.VERIFIED])


@pytest.mark.parametrize("step", ["fmax(x, shuffle_xor(x, 32))", "fmax(x, shuffle_xor(x, 32, drops=1))"])
def test_a_butterfly_step_dropping_the_wrong_component_is_a_replayed_violation(step):
    """Without drops= (the last component, the query) or with drops=1 the two lanes' rows differ."""
    (k,) = ave_decl.check(BUTTERFLY.read_text().replace(STEP, step), path="bad.ave", confirm=True).kernels
    bad = [f for f in k.findings if f.verdict == Verdict.VIOLATION and f.severity == "error"]
    first = min(bad, key=lambda f: f.location.line)
    assert first.invariant == "ave/row-statistics" and first.location.line == 11, first.message
    assert first.message.startswith("the reduction mixes rows: lane ") and first.replay["confirmed"], first.replay


@pytest.mark.parametrize("step, words", [
    ("fmax(x, shuffle_xor(x, 32, foo=0))", "shuffle_xor() has no keyword 'foo' (it takes drops=)"),
    ("fmax(x, shuffle_xor(x, 32, drops=9))", "shuffle_xor(): drops=9 names no tag component"),
    ("fmax(x, shuffle_xor(x + 1.0, 32, drops=0))", "only as the partner in fmax(x, shuffle_xor(x, m, drops=k))"),
    ("shuffle_xor(x, 32, drops=0)", "only as the partner in fmax(x, shuffle_xor(x, m, drops=k))"),
    # keywords no construct reads were once ignored: `fmax(..., drops=0)` verified as if unsaid
    ("fmax(x, shuffle_xor(x, 32), drops=0)", "fmax() takes no keyword arguments (a butterfly step says drops= on its"),
    ("exp2(shuffle(x, 3, drops=0))", "shuffle() takes no keyword arguments"),
])
def test_a_misplaced_or_unknown_keyword_is_a_located_error(ave, tmp_path, step, words):
    from conftest import front_end_error

    out = front_end_error(ave, tmp_path / "k.ave", BUTTERFLY.read_text().replace(STEP, step))
    assert "k.ave:11:" in out and words in out, out
    first = out.splitlines()[0]
    for command in ("simulate", "run"):  # the simulator once honoured drops= where it sat and ran on
        r = ave(command, tmp_path / "k.ave")
        assert r.code == 3 and (r.out + r.err).splitlines()[0] == first, (command, r.out + r.err)


@pytest.mark.parametrize("text, old, new, line", [
    (BUTTERFLY, STEP, "fmax(x, shuffle_xor(x, 32, drops=2))", 11),
    (BUTTERFLY, STEP, "fmax(x, shuffle_xor(x, 32, drops=-3))", 11),
    (BUTTERFLY, STEP, "lane_max(x, 64, drops=5)", 11),
    (EXAMPLE, "reduce_max(s, drops=1)", "reduce_max(s, drops=3)", 43),
    (EXAMPLE, "reduce_sum(p, drops=1)", "reduce_sum(p, drops=-4)", 48),
])
def test_a_drops_past_the_operands_tag_rank_is_a_located_error(ave, tmp_path, text, old, new, line):
    """drops=k within the largest tag but past the rank of the tag its operand carries (known after
    the fixpoint) was an UNKNOWN with no counterexample; it is a bad kernel: exit 3 at the reduction."""
    source = text.read_text()
    assert old in source
    path = tmp_path / "k.ave"
    path.write_text(source.replace(old, new))
    r = ave("check", path)
    out = r.out + r.err
    assert r.code == 3 and out.startswith(f"{path}:{line}:") and "Traceback" not in out, out
    assert "names no component of the tag this reduction drops from" in out.splitlines()[0], out


def test_the_simulator_itself_refuses_a_misplaced_keyword():
    """simulate_source (the API, counterexample replay, the fuzzer) reads the AST without the
    lowering; it refuses a misplaced drops= with the lowering's error instead of honouring it."""
    from ave_decl.lang.errors import FrontEndError

    text = BUTTERFLY.read_text().replace(STEP, "fmax(x, shuffle_xor(x, 32), drops=0)")
    with pytest.raises(FrontEndError) as err:
        simulate_source(SourceFile("k.ave", text), {})
    assert err.value.one_line().startswith("k.ave:11:37: error: fmax() takes no keyword arguments"), err.value
