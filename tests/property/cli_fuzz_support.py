"""Inputs and oracles for the CLI fuzz test (tests/property/test_cli_fuzz.py).

Why a separate module: the strategies (hostile kernel bytes, grammar-aware mutations of the
shipped examples, hostile numbers) and the oracle (what a well-behaved `ave` run looks like) are
shared by every test of that file, and the oracle must be the same for the in-process runs
(click's CliRunner) and the real-process runs (`python -m ave_decl.cli`).

The oracle, for any input: the exit code is a documented one (never 70), no Python traceback is
printed, every front-end error about a kernel file carries `file:line:col`, error lines are
bounded (a huge literal is not echoed whole), `--json` prints valid JSON, and the run ends within
a bound far above a normal run (a hang fails the test; a slow machine does not).
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import click
from click.testing import CliRunner
from hypothesis import settings
from hypothesis import strategies as st

from ave_decl.cli import main
from ave_decl.testing.mutate import OPERATORS
from ave_decl.testing.strategies import AttentionSpec, GemmSpec, render

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOCUMENTED_EXIT_CODES = {0, 1, 2, 3, 4, 5}  # lang/errors.py ExitCode without INTERNAL (70)
HANG_BOUND_S = 300  # a normal run here takes well under 10 s: only a hang reaches this
MAX_ERROR_LINE = 2000  # an `error:` line longer than this echoes an input whole (issue 20: truncate)


def budget(default: int, long: int) -> int:
    """Examples per test, explicit per profile: `default` in `make test`, `long` under
    `--hypothesis-profile=long` (detected as conftest.examples does)."""
    return long if settings.default.max_examples >= 2000 else default


# ---------------------------------------------------------------- running the CLI


class Hang(BaseException):
    """Raised by the hang guard; a BaseException so that no `except Exception` in ave swallows it."""


@contextmanager
def hang_guard(seconds: float = HANG_BOUND_S):
    """Fail (raise Hang) if the body runs longer than `seconds` (SIGALRM: works in the main thread,
    also interrupts a blocking open() of a FIFO). The message gives the CPU time the run used, so
    a starved process on an overloaded machine (little CPU) can be told from a busy loop."""
    cpu = time.process_time()

    def on_alarm(signum, frame):
        raise Hang(f"the run did not end within {seconds} s (it used {time.process_time() - cpu:.1f} s of CPU)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    args: list[str]
    code: int
    out: str
    err: str
    raw_traceback: str = ""  # on exit 70: the exception the CLI mapped to 70, for the failure message

    @property
    def text(self) -> str:
        return self.out + self.err

    def describe(self) -> str:
        tail = self.text[-3000:]
        return f"ave {' '.join(map(repr, self.args))}\nexit {self.code}\n{tail}\n{self.raw_traceback}"


TALLY: dict[str, int] = {}  # inputs run per test, reported at the end of the module (and to a file)


def count(kind: str, n: int = 1) -> None:
    TALLY[kind] = TALLY.get(kind, 0) + n
    path = os.environ.get("AVE_CLI_FUZZ_TALLY")
    if path:
        Path(path).write_text(json.dumps(TALLY, sort_keys=True) + "\n")


def invoke(args: list[str]) -> Outcome:
    """`ave ARGS` in-process. catch_exceptions=False: an exception that escapes the CLI's own
    mapping fails the test with its traceback; one the CLI maps to exit 70 is re-raised below
    (bypassing the mapping) so that the failure shows where it came from."""
    runner = CliRunner()
    try:
        with hang_guard():
            r = runner.invoke(main, args, catch_exceptions=False)
    except Hang:
        _keep_inputs(args)
        raise
    outcome = Outcome(list(args), r.exit_code, r.stdout, r.stderr)
    if outcome.code == 70:
        outcome.raw_traceback = _unmapped_traceback(args)
    return outcome


def _keep_inputs(args: list[str]) -> None:
    """With AVE_CLI_FUZZ_KEEP=DIR, a run that hangs leaves its arguments and input files in DIR
    (Hypothesis does not shrink a BaseException, so this is the only record of the input)."""
    keep = os.environ.get("AVE_CLI_FUZZ_KEEP")
    if not keep:
        return
    out = Path(keep) / f"hang-{os.getpid()}-{time.time_ns()}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(args))
    for i, a in enumerate(args):
        p = Path(a)
        if p.is_file():
            shutil.copyfile(p, out / f"{i}-{p.name}")


def _unmapped_traceback(args: list[str]) -> str:
    runner = CliRunner()
    with runner.isolation(), hang_guard():
        try:
            click.Group.main(main, args=list(args), prog_name="ave", standalone_mode=False)
        except Exception:  # noqa: BLE001 - this is what we want to show
            return traceback.format_exc(limit=-8)
        except SystemExit:
            return ""
    return ""


def run_process(args: list[str], cwd: Path | None = None) -> Outcome:
    """`python -m ave_decl.cli ARGS` in a real process (the process boundary: stdio encodings,
    warnings printed to stderr, exit status)."""
    env = dict(os.environ, PYTHONWARNINGS="default")
    try:
        p = subprocess.run([sys.executable, "-m", "ave_decl.cli", *args], capture_output=True, cwd=cwd,
                           timeout=HANG_BOUND_S, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"ave {args!r} did not end within {HANG_BOUND_S} s") from None
    return Outcome(list(args), p.returncode, p.stdout.decode("utf-8", "replace"),
                   p.stderr.decode("utf-8", "replace"))


# ---------------------------------------------------------------- the oracle

_LOCATED = re.compile(r":(\d+):(\d+): (?:error|warning)")


def assert_well_behaved(o: Outcome, kernel_paths: list[str] = (), as_json: bool = False,
                        process: bool = False) -> None:
    """The properties every run of `ave` must have, whatever the input."""
    assert o.code != 70, "internal error (exit 70) on bad input\n" + o.describe()
    assert o.code in DOCUMENTED_EXIT_CODES, "undocumented exit code\n" + o.describe()
    assert "Traceback (most recent call last)" not in o.text, "traceback printed\n" + o.describe()
    assert "internal error" not in o.text, "internal error reported\n" + o.describe()
    assert "Aborted!" not in o.err, "the run was interrupted (click's KeyboardInterrupt exit)\n" + o.describe()
    if process:
        assert not re.search(r"\w+Warning: ", o.err), "a Python warning leaked to stderr\n" + o.describe()
    if o.code == 2:
        assert o.err.strip() or o.out.strip(), "usage error without a message\n" + o.describe()
    for line in o.text.splitlines():
        if "error:" in line:
            assert len(line) <= MAX_ERROR_LINE, f"error line of {len(line)} characters\n" + o.describe()
    errors = _json_errors(o) if as_json else None
    if errors is not None:
        for e in errors:
            assert e.get("kind") != "internal", "internal error in the JSON report\n" + o.describe()
            if e.get("kind") == "front-end":
                loc = e.get("location")
                assert loc and loc.get("line", 0) >= 1 and loc.get("col", 0) >= 1, \
                    f"front-end error without file:line:col: {e.get('message')!r}\n" + o.describe()
    else:
        _assert_text_locations(o, kernel_paths)


def _json_errors(o: Outcome) -> list[dict] | None:
    if o.code == 2 and not o.out.strip():
        return None  # a usage error before any report (e.g. a bad option value)
    try:
        data = json.loads(o.out)
    except ValueError:
        raise AssertionError("--json printed no valid JSON on stdout\n" + o.describe()) from None
    assert isinstance(data, dict), o.describe()
    return list(data.get("errors", []))


def _assert_text_locations(o: Outcome, kernel_paths) -> None:
    """Every `PATH...: error:` line about one of our readable kernel files has PATH:LINE:COL."""
    for line in o.text.splitlines():
        for p in kernel_paths:
            if not line.startswith(p + ":") or "error:" not in line:
                continue
            rest = line[len(p):]
            if re.match(r": error: (cannot read|no verdict within )", rest):
                # not a kernel construct: the file itself cannot be read, or it ran past
                # `audit --file-timeout` (kind "timeout" in JSON, where only "front-end" errors
                # need a location; found by the long profile, session 7, with --file-timeout 1.0
                # on a loaded machine)
                continue
            m = _LOCATED.match(rest)
            assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1, \
                f"front-end error without file:line:col: {line[:300]!r}\n" + o.describe()


# ---------------------------------------------------------------- kernel inputs

_TOKEN = re.compile(r"""
  "(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'                                   # strings
| 0[xX][0-9a-fA-F_]+|0[bB][01_]+                                            # based ints
| (?:[0-9][0-9_]*)?\.[0-9_]+(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*\.?(?:[eE][-+]?[0-9]+)?   # numbers
| [^\W\d]\w*                                                                # names, keywords
| \*\*|//=?|<<|>>|[-+*%]=|==|!=|<=|>=|[-+*/%@<>=~^&|()\[\]:;,.]            # operators
""", re.X)


@dataclass(frozen=True)
class Tokenized:
    """A seed kernel as alternating gaps (whitespace, newlines, comments) and tokens, so that a
    token-level edit keeps the rest of the layout (indentation, line numbers) as it was."""

    gaps: tuple[str, ...]  # len(tokens) + 1
    tokens: tuple[str, ...]

    @staticmethod
    def of(text: str) -> "Tokenized":
        gaps, tokens, pos = [], [], 0
        for m in _TOKEN.finditer(text):
            gaps.append(text[pos:m.start()])
            tokens.append(m.group())
            pos = m.end()
        gaps.append(text[pos:])
        return Tokenized(tuple(gaps), tuple(tokens))

    def join(self, tokens: list[str]) -> str:
        return "".join(g + t for g, t in zip(self.gaps, tokens)) + self.gaps[-1]


def _hostile_kernels() -> dict[str, str]:
    """Whole kernels for the known-bad inputs of issue 20 (always tried, as @example and as seeds)."""
    naive = (EXAMPLES / "gemm_naive.ave").read_text()
    body_end = naive.rstrip("\n")
    # one-space indentation keeps 700 nested ifs under 256 KiB (the nesting, not the size, is the test)
    deep = "".join(" " * (i + 1) + "if M > 0:\n" for i in range(700)) + " " * 701 + "pass\n"
    return {
        "loop_variable_after_loop": body_end + "\n    C[m, n] = A[m, k]\n",
        "nested_ifs_700": naive.split("    m = block_id")[0].replace("    ", " ") + deep,
        "nested_parens_5000": naive.replace("acc = 0.0", "acc = " + "(" * 5000 + "0.0" + ")" * 5000),
        "nested_unary_5000": naive.replace("acc = 0.0", "acc = " + "-" * 5000 + "0.0"),
        "huge_shift": naive.replace("assume(M % 16 == 0", "assume(M < (1 << 10000000), M % 16 == 0"),
        "huge_int_literal": naive.replace("assume(M % 16 == 0", "assume(M < " + "9" * 5000 + ", M % 16 == 0"),
        "literal_100kb": naive.replace("acc = 0.0", "acc = " + "7" * 100_000 + "x"),
        "int_literal_beyond_32_bits": naive.replace("acc = 0.0", "acc = 0.0 + 4294967296"),
        "block_zero": naive.replace("block=(16, 16)", "block=(0, 16)"),
        "block_negative": naive.replace("block=(16, 16)", "block=(-16, 16)"),
        "block_1024x1024": naive.replace("block=(16, 16)", "block=(1024, 1024)"),
        "bom": "\ufeff" + naive,
        "crlf": naive.replace("\n", "\r\n"),
        "cr_only": naive.replace("\n", "\r"),
        "form_feed": naive.replace("\n@kernel", "\n\x0c@kernel"),
        "reference_np_escape": naive.replace('reference="C = A @ B"',
                                             "reference=\"C = A @ B + 0 * np.f2py.os.system('true')\""),
    }


HOSTILE_KERNELS = _hostile_kernels()


@lru_cache(maxsize=1)
def seeds() -> tuple[str, ...]:
    """Valid kernels to mutate: the shipped examples, members of the generated families
    (ave_decl.testing.strategies), and the known-bad kernels."""
    texts = [p.read_text() for p in sorted(EXAMPLES.glob("*.ave"))]
    texts += [render(GemmSpec()), render(GemmSpec(2, 1, 16, instruction="m16n8k16", copy_width=1)),
              render(GemmSpec(naive=True)), render(AttentionSpec(group=2, causal=True))]
    texts += [t for k, t in sorted(HOSTILE_KERNELS.items()) if k not in ("literal_100kb", "nested_ifs_700")]
    return tuple(texts)


@lru_cache(maxsize=None)
def tokenized(i: int) -> Tokenized:
    return Tokenized.of(seeds()[i])


INTERESTING_TOKENS = [
    "0", "-1", "1", "-16", "65", "1024", "4096", "1 << 40", "1 << 10000000", "10 ** 4000", "9" * 400,
    "0x" + "f" * 40, "1e308", "-1e308", "1e-400", "0.5", "nan", "inf", "-0", "True", "False", "None",
    "lambda", "lambda: 0", "lambda a, b: a", "__import__('os')", "np", "np.os.system('true')", "A.T", "A[0]",
    "(", ")", "[", "]", ",", ":", "=", "==", "@", "**", "//", "%", "^", "~", "<<", "not", "and", "if", "else",
    "for", "in", "def", "from", "import", "range(0)", "range(-1)", "range(1 << 62)", "range(M)", "'x'",
    '"\\x00"', "'", '"', "\\", "\t", "\x0c", "\r", "\x00", "\ufeff", "é", "∑", "\u2028", "\U0001f600",
    "x" * 300, "#", ";", "pass", "shared(f32, (1 << 40,))", "local(f32, (0,))", "local(f32, (-4,))",
    "thread_id(7)", "block_id(-1)", "lane_id()", "syncthreads()", "async_wait()", "assume(False)",
    "assume(M < 0)", "Tensor[f32, (M,)]", "Tensor[f32, ()]", "Tensor[i4, (M, M, M, M, M, M, M, M, M)]",
    "tag(A, lambda: (), \"A\")", "f16", "bf16", "i32", "M", "N", "K", "k", "t", "lane",
]

HOSTILE_STATEMENTS = [
    "pass", "assume(M < (1 << 10000000))", "assume(M == 0)", "assume(False)", "x = 1 // 0", "x = 1 % 0",
    "x = 2 ** 100000", "x = A[-1]", "x = A[1 << 40, 0]", "syncthreads()", "for q in range(4):",
    "if M > 0:", "else:", "elif M:", "for k in range(K):", "x = k", "x = q", "acc = acc", "C = A",
    "tag(C, lambda m, n: (m, n), \"C\")", "assert_tag(C, C, lambda a, b: a == b)", "async_copy(A, A)",
    "x = lane_sum(A[0, 0], 0)", "x = lane_max(A[0, 0], 3)", "x = exp2(A[0, 0])", "s = shared(f32, (0, 0))",
    "s = shared(f32, (1 << 20, 1 << 20))", "r = local(f32, (1 << 30,))", "x = select(True, 1, 2)",
]


@st.composite
def mutated_kernel(draw) -> str:
    """A seed kernel with 1-4 grammar-aware edits: token deletions, duplications, swaps,
    replacements (by another token of the file or a hostile one), line edits, hostile statements,
    encoding changes, or one of the mutation operators of ave_decl.testing.mutate."""
    i = draw(st.integers(0, len(seeds()) - 1), label="seed")
    tk = tokenized(i)
    tokens = list(tk.tokens)
    n = len(tokens)
    pool = st.sampled_from(tk.tokens) | st.sampled_from(INTERESTING_TOKENS)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "replace", "replace", "swap", "insert"]))
        j = draw(st.integers(0, n - 1))
        if op == "delete":
            tokens[j] = ""
        elif op == "duplicate":
            tokens[j] = tokens[j] + " " + tokens[j]
        elif op == "replace":
            tokens[j] = draw(pool)
        elif op == "swap":
            k = draw(st.integers(0, n - 1))
            tokens[j], tokens[k] = tokens[k], tokens[j]
        else:
            tokens[j] = draw(pool) + " " + tokens[j]
    text = tk.join(tokens)
    if draw(st.booleans()):
        text = draw(line_edits(text))
    if draw(st.integers(0, 9)) == 0:
        text = draw(encoding_change(text))
    return text


@st.composite
def line_edits(draw, text: str) -> str:
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        j = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "move", "indent", "dedent", "statement", "nest"]))
        indent = lines[j][:len(lines[j]) - len(lines[j].lstrip())] or "    "
        if op == "delete":
            del lines[j]
        elif op == "duplicate":
            lines.insert(j, lines[j])
        elif op == "move":
            lines.insert(draw(st.integers(0, len(lines))), lines.pop(j))
        elif op == "indent":
            lines[j] = draw(st.sampled_from(["    ", "\t", " ", "        "])) + lines[j]
        elif op == "dedent":
            lines[j] = lines[j][draw(st.integers(1, 8)):]
        elif op == "statement":
            lines.insert(j, indent + draw(st.sampled_from(HOSTILE_STATEMENTS)))
        else:  # wrap the rest of the body in `depth` nested ifs
            depth = draw(st.sampled_from([2, 30, 200, 700]))  # one space per level: stays under 256 KiB
            head = [indent + " " * d + "if M > 0:" for d in range(depth)]
            lines[j:] = head + [indent + " " * depth + ln.lstrip() for ln in lines[j:] if ln.strip()] \
                + ([indent + " " * depth + "pass"] if not any(ln.strip() for ln in lines[j:]) else [])
        if not lines:
            lines = [""]
    return "\n".join(lines)


@st.composite
def encoding_change(draw, text: str) -> str:
    op = draw(st.sampled_from(["bom", "crlf", "cr", "formfeed", "nul", "tabs", "truncate", "no_final_newline"]))
    if op == "bom":
        return "\ufeff" + text
    if op == "crlf":
        return text.replace("\n", "\r\n")
    if op == "cr":
        return text.replace("\n", "\r")
    if op == "formfeed":
        return text.replace("\n", "\n\x0c", draw(st.integers(1, 3)))
    if op == "nul":
        k = draw(st.integers(0, len(text)))
        return text[:k] + "\x00" + text[k:]
    if op == "tabs":
        return text.replace("    ", "\t")
    if op == "truncate":
        return text[:draw(st.integers(0, len(text)))]
    return text.rstrip("\n")


@st.composite
def semantic_mutant(draw) -> str:
    """A mutant of a seed made by one of the mutation benchmark's operators (a realistic bug, valid
    syntax): these reach the Datalog engine and the solver."""
    text = draw(st.sampled_from(seeds()))
    found = [m for op in sorted(OPERATORS) for m in OPERATORS[op](text)]
    return draw(st.sampled_from(found)).text if found else text


@st.composite
def spliced_bytes(draw) -> bytes:
    """Random bytes spliced into a seed's bytes (invalid UTF-8, control bytes, truncation)."""
    raw = draw(st.sampled_from(seeds())).encode()
    k = draw(st.integers(0, len(raw)))
    cut = draw(st.integers(0, 16))
    return raw[:k] + draw(st.binary(min_size=1, max_size=16)) + raw[k + cut:]


def kernel_bytes() -> st.SearchStrategy[bytes]:
    """Contents of a kernel file: mostly grammar-aware mutations (they get past the lexer and
    exercise the parser, the lowering's semantic checks, the engine and the solver), some raw
    bytes and text, some known-bad kernels."""
    utf8 = st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass"))
    return st.one_of(
        mutated_kernel().map(lambda s: s.encode("utf-8", "surrogatepass")),
        mutated_kernel().map(lambda s: s.encode("utf-8", "surrogatepass")),
        mutated_kernel().map(lambda s: s.encode("utf-8", "surrogatepass")),
        spliced_bytes(),
        st.binary(max_size=400),
        utf8,
        semantic_mutant().map(str.encode),
        st.sampled_from(sorted(HOSTILE_KERNELS.values())).map(str.encode),
    )


# ---------------------------------------------------------------- numbers

def number_texts(plain: list[str]) -> st.SearchStrategy[str]:
    """An option value as typed: ordinary values (`plain`), floats including nan/inf/huge/tiny/
    negative, integers far out of range, and garbage."""
    floats = st.floats(allow_nan=True, allow_infinity=True).map(repr)
    specials = st.sampled_from([
        "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "1.7976931348623157e308", "1e309", "1e-308",
        "5e-324", "0", "-0", "0.0", "-1", "-0.001", "0.001", "0.0009", "1e-3", str(2 ** 63), str(10 ** 400),
        "", " ", "abc", "1e", "0x10", "1_000", "١", "²", "1,5", "10s", "--1", "+5", " 7 ", "\x00", "1" * 5000,
    ])
    ints = st.integers(-(2 ** 80), 2 ** 80).map(str)
    return st.one_of(st.sampled_from(plain), floats, specials, ints)


def is_nan_text(text: str) -> bool:
    try:
        return math.isnan(float(text))
    except ValueError:
        return False
