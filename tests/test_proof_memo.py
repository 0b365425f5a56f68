"""The proof memo (solver/proof_memo.py): proved queries reused across kernels and processes.

What must hold: a key forgets variable names but not the pattern of their occurrences, their
sorts or their ranges; only UNSAT is remembered, so a report with a warm memo equals the report
with the memo off (verdicts, messages, counterexamples); the proof file survives bad bytes."""
from __future__ import annotations

import os

import pytest
import z3

from ave_decl import check
from ave_decl.solver import proof_memo
from ave_decl.solver.proof_memo import FormulaDigester, ProofFile, ProofMemo
from ave_decl.testing.mutate import mutants
from conftest import EXAMPLES


@pytest.fixture
def memo(monkeypatch):
    fresh = ProofMemo()
    monkeypatch.setattr(proof_memo, "MEMO", fresh)
    monkeypatch.delenv("AVE_PROOF_MEMO", raising=False)
    return fresh


def _key(make, ranges_of=()):
    """The key of the formulas `make(ctx)` returns, with ranges for the named variables."""
    ctx = z3.Context()
    formulas, named = make(ctx)
    ranges = {named[n].get_id(): r for n, r in ranges_of}
    return FormulaDigester(ctx, ranges).key(formulas)


def test_a_key_forgets_names_but_not_the_pattern_of_occurrences():
    def differ(a, b):
        return lambda ctx: (lambda x, y: ([x - y > 0, x < 64], {"x": x, "y": y}))(z3.Int(a, ctx), z3.Int(b, ctx))

    same = lambda ctx: (lambda x: ([x - x > 0, x < 64], {"x": x}))(z3.Int("x", ctx))  # noqa: E731
    assert _key(differ("u3.lane", "u4.lane")) == _key(differ("u7.lane", "u9.lane"))
    assert _key(differ("u3.lane", "u4.lane")) != _key(same)
    swapped = lambda ctx: (lambda x, y: ([y - x > 0, x < 64], {"x": x, "y": y}))(z3.Int("a", ctx), z3.Int("b", ctx))  # noqa: E731
    assert _key(differ("a", "b")) != _key(swapped)


def test_a_key_carries_ranges_numerals_and_sorts():
    def f(ctx):
        x = z3.Int("x", ctx)
        return [x % 64 == 3], {"x": x}

    keys = [_key(f, [("x", (0, 63))]), _key(f, [("x", (0, 127))]), _key(f)]
    assert len(set(keys)) == 3
    g = lambda ctx: (lambda x: ([x % 32 == 3], {"x": x}))(z3.Int("x", ctx))  # noqa: E731
    assert _key(f) != _key(g)
    b = lambda ctx: (lambda p: ([p == z3.BoolVal(True, ctx)], {"p": p}))(z3.Bool("p", ctx))  # noqa: E731
    i = lambda ctx: (lambda p: ([p == 1], {"p": p}))(z3.Int("p", ctx))  # noqa: E731
    assert _key(b) != _key(i)


def test_a_key_fed_chunk_by_chunk_is_the_key_of_the_chunks_joined():
    """Slices of one obligation share their first chunks (solve._proved_sliced): the digest's
    state after a shared prefix is reused, and each key must still be the one `key` gives for
    the whole list (variables first met in a later chunk take later positions)."""
    ctx = z3.Context()
    x, y, z, w = (z3.Int(n, ctx) for n in "xyzw")
    ranges = {x.get_id(): (0, 63), z.get_id(): (0, 3)}
    base = [x >= 0, x < 64]
    left = [y == x % 16, z + y > 2]
    other_left = [y == x % 16 + 1, w > x]
    tails = [[z != y], [w - x > 0, y < 8], [x == y]]
    digester = FormulaDigester(ctx, ranges)
    prefixes: dict = {}
    keys = []
    for middle in (left, other_left):
        for tail in tails:
            chunks = [base, middle, tail]
            keys.append(digester.chunked_key(chunks, prefixes))
            assert keys[-1] == FormulaDigester(ctx, ranges).key([f for c in chunks for f in c])
    assert len(set(keys)) == len(keys)
    assert (id(base), id(left)) in prefixes  # the shared prefix was kept, so it was reused
    f = z3.Function("f", z3.IntSort(ctx), z3.IntSort(ctx))
    assert digester.chunked_key([base, [f(x) == 1], tails[0]], prefixes) is None  # not digested


def test_uninterpreted_reads_and_parameterised_operators_are_not_digested():
    def uf(ctx):
        x = z3.Int("x", ctx)
        table = z3.Function("uf:idx", z3.IntSort(ctx), z3.IntSort(ctx))
        return [table(x) > 3], {"x": x}

    def extract(ctx):  # Extract's bounds are parameters that no sort states
        x = z3.BitVec("x", 8, ctx)
        return [z3.Extract(3, 0, x) == 1], {"x": x}

    assert _key(uf) is None and _key(extract) is None


def test_bit_vector_terms_are_digested_with_their_widths():
    """XOR of operands past 16 bits is encoded through Int2BV (solver/smt.py): those queries are
    remembered too, keyed by the widths, which decide satisfiability as much as the operators."""
    def xor(width):
        return lambda ctx: (lambda x: ([z3.BV2Int(z3.Int2BV(x, width) ^ 3) == 1], {"x": x}))(z3.Int("x", ctx))

    def distinct(width):  # over 1-bit vectors UNSAT, over 32-bit ones SAT: a sort kind is not enough
        return lambda ctx: (lambda x, y, z: ([z3.Distinct(x, y, z)], {"x": x}))(
            *(z3.BitVec(n, width, ctx) for n in "xyz"))

    keys = [_key(xor(8)), _key(xor(16)), _key(distinct(1)), _key(distinct(32))]
    assert None not in keys and len(set(keys)) == 4
    assert _key(xor(8)) == _key(xor(8))


def test_a_range_recorded_after_a_digest_changes_the_key():
    from ave_decl.solver.smt import Encoder

    enc = Encoder.__new__(Encoder)  # only the parts query_key and set_range use
    enc.ctx, enc.ranges, enc._ranged, enc._normaliser, enc._digester = z3.Context(), {}, [], None, None
    enc.use_proof_memo = True
    x = z3.Int("x", enc.ctx)
    before = enc.query_key([x % 64 == 3])
    enc.set_range(x, 0, 63)
    assert enc.query_key([x % 64 == 3]) != before


def test_a_proof_file_others_could_write_is_not_used(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    assert ProofFile.open(folder / "proofs-v1.bin") is None
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "target").write_bytes(ProofFile.MAGIC)
    (mine / "proofs-v1.bin").symlink_to(mine / "target")
    assert ProofFile.open(mine / "proofs-v1.bin") is None


def _findings(report):
    return [(f.invariant, f.verdict.name, f.location.line, f.message) for k in report.kernels for f in k.findings]


def test_a_warm_memo_gives_the_reports_of_a_cold_one(memo, monkeypatch):
    """The original kernel warms the memo; each mutant (some VIOLATION) then reuses proofs and
    must report exactly what it reports with the memo off, counterexamples included."""
    path = EXAMPLES / "gemm_lds_mfma.ave"
    text = path.read_text()
    cases = [m.text for m in mutants(text)][:4]
    # one query of the fourth mutant takes 1.5-4 CPU s, which a loaded machine stretches past the
    # default 10 s: the timeout is far from what a correct run needs, so load decides nothing
    check(text, path=str(path), violation_sets=False, timeout=120)
    warm = [_findings(check(t, path=str(path), violation_sets=False, timeout=120)) for t in cases]
    assert memo.hits > 0
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    cold = [_findings(check(t, path=str(path), violation_sets=False, timeout=120)) for t in cases]
    assert warm == cold
    assert any(v == "VIOLATION" for case in warm for _i, v, _l, _m in case)


def test_a_violation_is_never_remembered_as_a_proof_and_its_model_is_reused_unchanged(memo, monkeypatch):
    """A violated query is a miss of the proof memo every time; its canonical model is kept
    (in memory) and given to the same query again, so the second report equals the first and
    the report with the memo off."""
    path = EXAMPLES / "gemm_lds_mfma.ave"
    (bad,) = [m.text for m in mutants(path.read_text(), ["transpose_shared_read"])]
    first = check(bad, path=str(path), violation_sets=False)
    solved = [f for k in first.kernels for f in k.findings if f.verdict.name == "VIOLATION" and f.queries]
    assert solved  # violations the solver found (not structural ones)
    assert memo._violations  # (two obligations may pose the same query up to renaming: one entry)
    misses = memo.misses
    again = check(bad, path=str(path), violation_sets=False)
    assert _findings(first) == _findings(again)
    assert memo.misses - misses >= len(solved)  # each violating query missed the proofs again
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")
    assert _findings(check(bad, path=str(path), violation_sets=False)) == _findings(first)


def test_a_remembered_model_is_used_only_if_it_satisfies_the_query():
    from ave_decl.solver.canonical_model import free_constants, model_of_values, model_values

    ctx = z3.Context()
    x, y, b = z3.Int("x", ctx), z3.Int("y", ctx), z3.Bool("b", ctx)
    query = [x + y == 5, x > 3, z3.Or(b, y < 0)]
    solver = z3.Solver(ctx=ctx)
    solver.add(query)
    assert solver.check() == z3.sat
    constants = free_constants(query)
    values = model_values(solver.model(), constants)
    assert [str(c) for c in constants] == ["x", "y", "b"] and values is not None
    assert model_of_values(query, constants, values, ctx) is not None
    wrong = (values[0] + 1, *values[1:])  # x + y == 5 fails
    assert model_of_values(query, constants, wrong, ctx) is None
    assert model_of_values(query, constants, values[:2], ctx) is None  # another query's shape
    assert model_of_values(query, constants, (values[0], values[1], 7), ctx) is None  # an Int for a Bool


def test_the_proof_cache_is_reused_by_a_later_process_and_reports_alike(ave, memo, tmp_path):
    target = EXAMPLES / "gemm_mfma16.ave"
    first = ave("check", "--no-timings", "--proof-cache", tmp_path, target)
    store = tmp_path / "proofs" / "proofs-v1.bin"
    assert first.code == 0 and store.is_file()
    assert (os.stat(store).st_mode & 0o777) == 0o600
    proofs = (store.stat().st_size - len(ProofFile.MAGIC)) // 16
    assert proofs > 0 and (store.stat().st_size - len(ProofFile.MAGIC)) % 16 == 0
    memo.clear()  # a new process knows only the file
    hits = memo.hits
    second = ave("check", "--no-timings", "--proof-cache", tmp_path, target)
    assert second.out == first.out and second.code == first.code
    assert memo.hits - hits >= proofs // 2


@pytest.mark.parametrize("content", [b"", b"not a proof file at all", ProofFile.MAGIC + b"\x01" * 21])
def test_a_damaged_proof_file_is_started_over_or_read_up_to_its_torn_tail(tmp_path, content):
    path = tmp_path / "proofs-v1.bin"
    path.write_bytes(content)
    store = ProofFile.open(path)
    assert store is not None
    keys = store.keys()
    assert keys == ([b"\x01" * 16] if content.startswith(ProofFile.MAGIC) else [])
    store.append(b"\x02" * 16)
    store.close()
    assert ProofFile.open(path).keys() == keys + [b"\x02" * 16]


def test_a_full_proof_file_keeps_its_newest_half(tmp_path):
    path = tmp_path / "p.bin"
    store = ProofFile.open(path, capacity=8)
    for i in range(12):
        store.append(bytes([i]) * 16)
    store.close()
    assert [k[0] for k in ProofFile.open(path, capacity=8).keys()] == [8, 9, 10, 11]


def test_the_memo_is_bounded_and_forgets_the_least_recently_used():
    m = ProofMemo(capacity=2)
    for k in (b"a" * 16, b"b" * 16):
        m.remember(k)
    assert m.proved(b"a" * 16)
    m.remember(b"c" * 16)
    assert m.proved(b"a" * 16) and not m.proved(b"b" * 16) and m.proved(b"c" * 16)


def test_the_audit_keeps_its_proofs_beside_the_verdict_cache(ave, memo, tmp_path):
    """A copy of a corpus under another name misses the verdict cache (the path is part of its
    key) but meets every proof of the first audit: the proof file does not grow, and the reports
    agree but for the paths. (`memo` starts this process's memo empty, as a new `ave` process
    does: proofs an earlier test left in memory would never reach the file.)"""
    first, second, cache = tmp_path / "first", tmp_path / "second", tmp_path / "cache"
    for d in (first, second):
        d.mkdir()
        for name in ("gemm_lds_mfma.ave", "untagged_operand.ave"):
            (d / name).write_text((EXAMPLES / name).read_text())
    a = ave("audit", first, "-j", "1", "--cache-dir", cache, "--no-timings", "--json", tmp_path / "a.json")
    store = cache / "proofs" / "proofs-v1.bin"
    size = store.stat().st_size
    assert size > len(ProofFile.MAGIC)
    b = ave("audit", second, "-j", "1", "--cache-dir", cache, "--no-timings", "--json", tmp_path / "b.json")
    assert store.stat().st_size >= size and a.code == b.code == 1  # a query timed out under load may be added
    assert (tmp_path / "a.json").read_text().replace(str(first), "X") == \
        (tmp_path / "b.json").read_text().replace(str(second), "X")
    ave("audit", first, "-j", "1", "--no-cache", "--cache-dir", tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_an_index_table_is_copied_into_the_queries_context():
    """The canonical model's table of an index tensor is copied entry by entry within the query's
    own context (z3py's update_value used the default context for the entries' arguments)."""
    from ave_decl.solver.canonical_model import set_table

    ctx = z3.Context()
    f = z3.Function("T", z3.IntSort(ctx), z3.IntSort(ctx))
    x = z3.Int("x", ctx)
    solver = z3.Solver(ctx=ctx)
    solver.add(f(1) == 7, f(2) == 9, f(x) == 4, x > 5)
    assert solver.check() == z3.sat
    found = solver.model()
    model = z3.Model(ctx)
    set_table(model, f, found[f])
    model.update_value(x, found.eval(x))
    assert [model.eval(f(k), model_completion=True).as_long() for k in (1, 2)] == [7, 9]
    assert model.eval(f(x), model_completion=True).as_long() == 4


def test_violations_models_are_reused_by_a_later_process_and_report_alike(ave, memo, tmp_path, monkeypatch):
    """`--proof-cache` also keeps each violated query's canonical model (violations-v3.bin): a
    later process reports the same counterexamples without solving those queries again."""
    from ave_decl.solver import solve
    from ave_decl.solver.proof_memo import ViolationFile

    target = EXAMPLES / "gemm_lds_mfma.ave"  # VERIFIED with bank-conflict warnings, each a solved violation
    first = ave("check", "--no-timings", "--json", "-", "--proof-cache", tmp_path, target)
    store = tmp_path / "proofs" / "violations-v3.bin"
    assert store.is_file() and (os.stat(store).st_mode & 0o777) == 0o600
    models = ViolationFile.open(store).models()
    assert models and all(len(k) == 16 for k, _m in models)
    memo.clear()  # a new process knows only the files
    solved: list[int] = []
    canonical = solve.canonical_model
    monkeypatch.setattr(solve, "canonical_model", lambda *a, **k: solved.append(1) or canonical(*a, **k))
    second = ave("check", "--no-timings", "--json", "-", "--proof-cache", tmp_path, target)
    assert second.out == first.out and second.code == first.code
    assert solved == [], "a remembered violation was solved again"


def test_a_forged_violation_model_is_not_used(ave, memo, tmp_path):
    """A model read back is checked against the query: values that do not satisfy it are
    ignored and the violation is solved as if the file held nothing."""
    from ave_decl.solver.proof_memo import ViolationFile

    target = EXAMPLES / "gemm_lds_mfma.ave"
    first = ave("check", "--no-timings", "--json", "-", "--proof-cache", tmp_path, target)
    store = tmp_path / "proofs" / "violations-v3.bin"
    forged = [ViolationFile.record(key, sizes, tuple(v + 1 if not isinstance(v, bool) else v for v in values))
              for key, (sizes, values) in ViolationFile.open(store).models()]
    store.write_bytes(ViolationFile.MAGIC + b"".join(forged))
    memo.clear()
    assert ave("check", "--no-timings", "--json", "-", "--proof-cache", tmp_path, target).out == first.out


@pytest.mark.parametrize("tail, kept", [
    (b"", 2),
    (b"\x07" * 16 + (5).to_bytes(4, "little") + b"1|", 2),  # torn: the payload is shorter than its length
    (b"\x07" * 16 + (3).to_bytes(4, "little") + b"1|x", 2),  # not integers: the file ends there
    (b"\x07" * 16 + (2).to_bytes(4, "little") + b"|T", 3),  # no sizes, one Boolean
])
def test_a_damaged_violation_file_is_read_up_to_its_last_whole_record(tmp_path, tail, kept):
    from ave_decl.solver.proof_memo import ViolationFile

    path = tmp_path / "v.bin"
    good = [ViolationFile.record(bytes([i]) * 16, (0, 2), (64, -3, True)) for i in range(2)]
    path.write_bytes(ViolationFile.MAGIC + b"".join(good) + tail)
    path.chmod(0o600)
    store = ViolationFile.open(path)
    models = store.models()
    assert len(models) == kept and models[0] == (b"\x00" * 16, ((0, 2), (64, -3, True)))
    store.append(ViolationFile.record(b"\x09" * 16, (), (1,)))
    store.close()
    assert ViolationFile.open(path).models()[-1] == (b"\x09" * 16, ((), (1,)))
    assert len(ViolationFile.open(path).models()) == kept + 1
