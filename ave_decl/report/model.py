"""The structured report: what `--json` prints and what `ave_decl.check` returns.

Schema version and field meanings: docs/json-schema.md. Plain dataclasses, no printing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from ..lang.errors import ExitCode

SCHEMA_VERSION = "1.0"


class Verdict(str, Enum):
    VERIFIED = "VERIFIED"
    VIOLATION = "VIOLATION"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"


@dataclass
class Location:
    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    # a point inside an inlined `@device` helper: the calls it was reached through, innermost first,
    # each {"helper", "file", "line", "col"}
    called_from: list[dict] = field(default_factory=list)

    def __str__(self) -> str:
        calls = "".join(f", in helper '{c['helper']}' called at {c['file']}:{c['line']}:{c['col']}"
                        for c in self.called_from)
        return f"{self.file}:{self.line}:{self.col}" + (f" ({calls[2:]})" if calls else "")

    @staticmethod
    def of(span) -> "Location":
        """The location of a source span (lang.source.Span), with its helper call chain."""
        return Location(span.path, span.line, span.col, span.end_line, span.end_col,
                        [{"helper": c.helper, "file": c.at.path, "line": c.at.line, "col": c.at.col}
                         for c in span.via])


@dataclass
class ChainPoint:
    """One program point behind an operand: where it was used, loaded, stored, or tagged."""

    kind: str  # use | load | store | source | mma-operand | branch | barrier
    location: Location
    buffer: str
    thread: int | None
    iterations: dict[str, int]
    note: str = ""


@dataclass
class Side:
    """One side of a violated relation, at the counterexample's instance."""

    label: str  # e.g. "A operand", "lhs"
    lane: int | None
    value_index: int | None
    coordinates: list[int]
    tag_name: str
    tag: list[int]
    chain: list[ChainPoint]
    # "tag": a tagged value; "index": coordinates only; "access": a memory access (tag_name = buffer);
    # "path": the arm of an `if` a thread takes (tag = [barriers it reaches there], chain = those barriers)
    kind: str = "tag"


@dataclass
class Counterexample:
    block: list[int]
    thread: list[int]
    thread_linear: int
    group_kind: str  # wave | warp
    group_size: int
    group_index: int
    lane: int
    iterations: dict[str, int]
    value_index: int | None
    sizes: dict[str, int]
    lhs: Side
    rhs: Side
    relation: str  # the relation that fails, in words
    instruction: dict[str, int] = field(default_factory=dict)  # e.g. row/col/k of a matrix instruction
    # index-tensor entries the counterexample relies on: tensor -> [[coordinates..., value], ...]
    index_tables: dict[str, list[list[int]]] = field(default_factory=dict)


@dataclass
class Finding:
    invariant: str
    title: str
    severity: str
    verdict: Verdict
    location: Location
    message: str
    counterexample: Counterexample | None = None
    reason: str = ""  # for UNKNOWN and structural violations
    queries: int = 0
    solver_ms: float = 0.0
    replay: dict | None = None  # with --confirm: {"confirmed": bool, "detail": str, "observed": {...}}
    suppression: dict | None = None  # {"kind": "inSource" | "external", "justification": str}
    baseline_state: str | None = None  # with --baseline: "new" | "unchanged"
    fingerprint: str = ""  # stable across moved lines (rule, kernel, text of the site line)
    violation_set: dict | None = None  # exact violating points on the reported path (violation_set.py)
    # where the missing statement goes: {"message", "file", "start_line", "end_line"[, "alternative"]}
    fix_hint: dict | None = None

    @property
    def counts(self) -> bool:
        """Whether the finding decides the verdict and exit code (suppressed ones and performance
        warnings do not)."""
        return self.suppression is None and self.severity == "error"


@dataclass
class KernelReport:
    kernel: str
    file: str
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)
    obligations: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    unchecked: int = 0  # obligations left undecided by --max-errors (0: every one was decided)


@dataclass
class ErrorReport:
    file: str
    kind: str  # front-end | rules | usage | internal
    message: str
    location: Location | None
    rendered: str
    exit_code: int

    @property
    def counts(self) -> bool:
        """Whether it is one more error in the summaries: a file's time-out is not, it is the
        reason its kernel is UNKNOWN (counted there)."""
        return self.kind != "timeout"


@dataclass
class Report:
    version: str = SCHEMA_VERSION
    tool: str = "ave"
    engine: str = "embedded"
    kernels: list[KernelReport] = field(default_factory=list)
    errors: list[ErrorReport] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The first that applies: 70 internal, 4 rules, 3 front end, 1 violation, 5 inconclusive, 0."""
        codes = {e.exit_code for e in self.errors}
        for code in (ExitCode.INTERNAL, ExitCode.RULES, ExitCode.USAGE, ExitCode.FRONT_END):
            if int(code) in codes:
                return int(code)
        if any(k.verdict == Verdict.VIOLATION for k in self.kernels):
            return int(ExitCode.VIOLATION)
        if any(k.verdict == Verdict.UNKNOWN for k in self.kernels):
            return int(ExitCode.INCONCLUSIVE)
        return int(ExitCode.CLEAN)

    def summary(self) -> dict[str, int]:
        out = {v.value.lower(): 0 for v in Verdict}
        for k in self.kernels:
            out[k.verdict.value.lower()] += 1
        out["error"] += sum(1 for e in self.errors if e.counts)
        out["suppressed"] = sum(1 for k in self.kernels for f in k.findings if f.suppression is not None)
        return out

    def to_json(self, timings: bool = True) -> dict[str, Any]:
        """`timings=False` (`--no-timings`) drops every measured time (`timings_ms`, `solver_ms`),
        so that the same input gives byte-identical JSON from run to run."""
        data = asdict(self)
        data["exit_code"] = self.exit_code
        data["summary"] = self.summary()
        if not timings:
            for k in data["kernels"]:
                k.pop("timings_ms", None)
                for f in k["findings"]:
                    f.pop("solver_ms", None)
        return _plain(data)


def _plain(x):
    if isinstance(x, Enum):
        return x.value
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


# ---------------------------------------------------------------- reading reports back (cache)
def _location(d: dict | None) -> Location | None:
    return Location(**d) if d else None


def _side(d: dict) -> Side:
    d = dict(d)
    d["chain"] = [ChainPoint(**{**p, "location": Location(**p["location"])}) for p in d["chain"]]
    return Side(**d)


def finding_from_json(d: dict) -> Finding:
    d = dict(d)
    d["verdict"] = Verdict(d["verdict"])
    d["location"] = Location(**d["location"])
    c = d.get("counterexample")
    if c is not None:
        c = dict(c)
        c["lhs"], c["rhs"] = _side(c["lhs"]), _side(c["rhs"])
        d["counterexample"] = Counterexample(**c)
    return Finding(**d)


def kernel_from_json(d: dict) -> KernelReport:
    d = dict(d)
    d["verdict"] = Verdict(d["verdict"])
    d["findings"] = [finding_from_json(f) for f in d["findings"]]
    return KernelReport(**d)


def error_from_json(d: dict) -> ErrorReport:
    d = dict(d)
    d["location"] = _location(d["location"])
    return ErrorReport(**d)
