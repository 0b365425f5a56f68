"""parse(print(ast)) == ast, on generated ASTs and on every example; mutated files never crash."""
from __future__ import annotations

import string
from pathlib import Path

from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ave_decl.lang import ast as A
from ave_decl.lang import printer
from ave_decl.lang.errors import AveError
from ave_decl.lang.parser import parse_text
from ave_decl.lang.source import SourceFile

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEYWORDS = {"lambda", "and", "or", "not", "if", "else", "elif", "for", "in", "def", "from", "import", "pass",
            "True", "False"}

names = st.text(string.ascii_lowercase, min_size=1, max_size=3).filter(lambda s: s not in KEYWORDS).map(A.Name)
ints = st.integers(0, 10**6).map(A.Int)
floats = st.floats(0, 1e6, allow_nan=False, allow_infinity=False).map(A.Float)
strs = st.text(string.ascii_letters + ' "\\', max_size=5).map(A.Str)
leaves = st.one_of(names, ints, floats, strs, st.booleans().map(A.Bool))
BINOPS = ["+", "-", "*", "/", "//", "%", "@", "**", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">="]


def _compound(children):
    return st.one_of(
        st.builds(A.BinOp, st.sampled_from(BINOPS), children, children),
        st.builds(A.UnaryOp, st.sampled_from(["-", "+", "~", "not"]), children),
        st.builds(A.BoolOp, st.sampled_from(["and", "or"]), st.lists(children, min_size=2, max_size=3).map(tuple)),
        st.builds(A.Call, names, st.lists(children, max_size=3).map(tuple),
                  st.lists(st.builds(A.Keyword, st.sampled_from(["grid", "block", "layout"]), children),
                           max_size=2, unique_by=lambda k: k.name).map(tuple)),
        st.builds(A.Subscript, names, st.lists(children, min_size=1, max_size=3).map(tuple)),
        st.builds(A.Tuple, st.lists(children, max_size=3).map(tuple)),
        st.builds(A.IfExp, children, children, children),
        st.builds(A.Lambda, st.lists(st.sampled_from(["i", "j", "k"]), max_size=3, unique=True).map(tuple),
                  children),
    )


_exprs = st.recursive(leaves, _compound, max_leaves=12)
exprs = st.deferred(lambda: _exprs)  # keeps the strategy's repr small


def _stmts_at(depth: int):
    simple = st.one_of(
        st.builds(A.Assign, names, exprs),
        st.builds(A.Assign, st.builds(A.Subscript, names, st.lists(exprs, min_size=1, max_size=2).map(tuple)), exprs),
        st.builds(A.AugAssign, names, st.sampled_from(["+", "-", "*", "//", "%"]), exprs),
        st.builds(A.ExprStmt, st.builds(A.Call, names, st.lists(exprs, max_size=2).map(tuple))),
        st.just(A.Pass()),
    )
    if depth == 0:
        return simple
    body = st.lists(STMTS[depth - 1], min_size=1, max_size=3).map(tuple)
    return st.one_of(simple, st.builds(A.For, st.sampled_from(["i", "kt"]), exprs, body),
                     st.builds(A.If, exprs, body, st.one_of(st.just(()), body)))


STMTS: list = []
for _depth in range(3):
    STMTS.append(_stmts_at(_depth))

kernels = st.builds(
    A.Kernel, st.sampled_from(["k", "gemm"]), st.builds(A.Call, st.just(A.Name("kernel")), st.just(()),
                                                        st.just((A.Keyword("block", A.Int(64)),))),
    st.lists(st.builds(A.Param, st.sampled_from(["A", "B", "C"]), exprs), max_size=3,
             unique_by=lambda p: p.name).map(tuple),
    st.lists(STMTS[2], min_size=1, max_size=4).map(tuple))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exprs)
def test_expression_round_trip(e):
    text = printer.expr(e)
    parsed = parse_text(f"@kernel()\ndef k():\n    {text}\n").kernels[0].body[0]
    assert parsed == A.ExprStmt(e), text


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(kernels, min_size=1, max_size=2))
def test_module_round_trip(ks):
    m = A.Module((A.Import("ave.amdgpu", ("mfma_f32_32x32x8_bf16",)),), tuple(ks))
    text = printer.module(m)
    assert parse_text(text) == m, text


# the shipped examples with the language's newer constructs (helpers, wave specialization, lane
# exchange) besides the top level; examples/speed/ is left out (its proofs take a minute)
LANGUAGE_EXAMPLES = sorted(EXAMPLES.glob("*.ave")) + sorted(
    p for d in ("helpers", "specialized", "lanes", "buffers", "subviews", "packed") for p in (EXAMPLES / d).glob("*.ave"))


def test_examples_round_trip():
    for path in LANGUAGE_EXAMPLES:
        m = parse_text(path.read_text(), str(path))
        assert parse_text(printer.module(m)) == m, path


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LANGUAGE_EXAMPLES), st.data())
def test_mutated_examples_never_crash(path, data):
    """Byte-level mutations: a clean AveError or a parsed module, never another exception."""
    from ave_decl.facts.lower import lower_module
    from ave_decl.lang.parser import parse_source

    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        if op == "flip":
            raw[pos] = data.draw(st.sampled_from(b"()[]:,=+-*/%#\n \t0123456789abcxyz\"'@."))
        elif op == "delete":
            del raw[pos]
        else:
            raw.insert(pos, data.draw(st.sampled_from(b"()[]:\n    ")))
    try:
        src = SourceFile(str(path), raw.decode("utf-8", errors="strict"))
        lower_module(parse_source(src), src)
    except AveError as exc:
        assert exc.span is None or exc.span.line >= 0
    except UnicodeDecodeError:
        pass


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LANGUAGE_EXAMPLES), st.lists(st.tuples(st.integers(0, 10**6),
       st.sampled_from(list(b"()[]:,=+-*/%#\n 0123456789abcxyz.")), st.sampled_from(["flip", "delete", "insert"])),
       min_size=1, max_size=3))
def test_mutated_examples_full_check_has_no_internal_error(path, edits):
    """The whole pipeline on mutated kernels: a verdict or a clean error, never an internal error."""
    import ave_decl

    raw = bytearray(path.read_bytes())
    for pos, byte, op in edits:
        pos %= len(raw)
        if op == "flip":
            raw[pos] = byte
        elif op == "delete":
            del raw[pos]
        else:
            raw.insert(pos, byte)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return
    report = ave_decl.check(text, path="mutated.ave", timeout=2)
    assert not [e for e in report.errors if e.kind == "internal"], [e.message for e in report.errors]
