"""The whole check, stage by stage: parse -> facts -> fixpoint -> obligations -> verdicts.

Each stage hands a plain value to the next; nothing reaches back. All kernels of one run share
one Datalog fixpoint (the kernel id is a column of every relation).
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .datalog.engines import ENGINES, make_engine
from .datalog.ruleset import load_rules, rule_metadata
from .facts.kernel_facts import KernelFacts, merge
from .facts.lower import lower_module
from .facts.view import KernelView
from .lang.errors import AveError, EngineTimeout, ExitCode, UsageError
from .lang.parser import parse_source
from .lang.source import SourceFile
from .report.model import ErrorReport, KernelReport, Location, Report, Verdict
from .report.suppress import annotate
from .solver.derived_facts import add_semantic_facts
from .solver.solve import KernelSolver


@dataclass
class Options:
    engine: str = "embedded"
    timeout_s: float = 10.0
    rules_dirs: tuple[str, ...] = ()
    engine_timeout_s: float | None = None
    confirm: bool = False
    violation_sets: bool = True


@dataclass
class Frontend:
    kernels: list[KernelFacts] = field(default_factory=list)
    errors: list[ErrorReport] = field(default_factory=list)
    timings: dict[int, dict[str, float]] = field(default_factory=dict)


def error_report(exc: AveError, source: SourceFile | None, path: str) -> ErrorReport:
    loc = None
    if exc.span is not None and exc.span.line > 0:
        s = exc.span
        loc = Location(s.path, s.line, s.col, s.end_line, s.end_col)
    return ErrorReport(path, exc.kind, exc.message, loc, exc.render(source), int(exc.exit_code))


def internal_error(exc: BaseException, path: str) -> ErrorReport:
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" (at {Path(last.filename).name}:{last.lineno})" if last else ""
    msg = f"internal error: {type(exc).__name__}: {exc}{where}"
    return ErrorReport(path, "internal", msg, None, f"{path}: error: {msg}", int(ExitCode.INTERNAL))


def front_end(sources: list[SourceFile]) -> Frontend:
    """Parse and lower every file; a bad file becomes an ErrorReport, the others go on."""
    out = Frontend()
    kid = 0
    for src in sources:
        try:
            t0 = time.perf_counter()
            module = parse_source(src)
            t1 = time.perf_counter()
            kernels = lower_module(module, src, kid)
            for kf in kernels:
                add_semantic_facts(kf)
                out.timings[kf.kid] = {"parse": (t1 - t0) * 1000 / len(kernels),
                                       "facts": (time.perf_counter() - t1) * 1000 / len(kernels)}
            out.kernels.extend(kernels)
            kid += len(kernels)
        except AveError as exc:
            out.errors.append(error_report(exc, src, src.path))
        except RecursionError:
            out.errors.append(ErrorReport(src.path, "front-end", "kernel is nested too deeply", None,
                                          f"{src.path}: error: kernel is nested too deeply", int(ExitCode.FRONT_END)))
        except Exception as exc:  # noqa: BLE001 - one bad kernel never stops a batch
            out.errors.append(internal_error(exc, src.path))
    return out


def run(sources: list[SourceFile], opts: Options, read_errors: list[ErrorReport] | None = None) -> Report:
    report = Report(engine=opts.engine)
    report.errors.extend(read_errors or [])
    if opts.engine not in ENGINES:
        raise UsageError(f"unknown engine '{opts.engine}' (choose from {', '.join(ENGINES)})")
    try:
        prog = load_rules(opts.rules_dirs)
        engine = make_engine(opts.engine, prog)
    except AveError as exc:
        report.errors.append(error_report(exc, None, str(exc.span.path) if exc.span else "<rules>"))
        return report
    fe = front_end(sources)
    report.errors.extend(fe.errors)
    if not fe.kernels:
        return report
    t0 = time.perf_counter()
    try:
        derived = engine.run(merge(fe.kernels), timeout=opts.engine_timeout_s)
    except EngineTimeout as exc:
        for kf in fe.kernels:
            report.kernels.append(KernelReport(kf.name, kf.source.path, Verdict.UNKNOWN, [], 0, {}))
        report.errors.append(error_report(exc, None, "<engine>"))
        return report
    except AveError as exc:
        report.errors.append(error_report(exc, None, "<rules>"))
        return report
    fixpoint_ms = (time.perf_counter() - t0) * 1000 / len(fe.kernels)
    by_kernel = split_by_kernel(derived)
    meta = rule_metadata(prog)
    for kf in fe.kernels:
        timings = dict(fe.timings.get(kf.kid, {}))
        timings["fixpoint"] = fixpoint_ms
        t1 = time.perf_counter()
        try:
            solver = KernelSolver(KernelView.of(kf), by_kernel.get(kf.kid, {}), meta, opts.timeout_s,
                                  opts.violation_sets)
            findings = solver.findings()
        except Exception as exc:  # noqa: BLE001
            report.errors.append(internal_error(exc, kf.source.path))
            continue
        timings["solving"] = (time.perf_counter() - t1) * 1000
        annotate(findings, kf.name, kf.source)
        if opts.confirm:
            t2 = time.perf_counter()
            confirm_findings(kf, findings)
            timings["replay"] = (time.perf_counter() - t2) * 1000
        report.kernels.append(KernelReport(kf.name, kf.source.path, kernel_verdict(findings), findings,
                                           sum(1 for f in findings), timings))
    return report


def confirm_findings(kf: KernelFacts, findings) -> None:
    """Replay every counterexample in the simulator (`--confirm`)."""
    from dataclasses import asdict

    from .sim.replay import replay

    for f in findings:
        if f.counterexample is None or f.severity != "error":  # performance warnings are not replayed
            continue
        try:
            f.replay = asdict(replay(kf.source, kf.name, f))
        except Exception as exc:  # noqa: BLE001 - a replay failure is reported, never fatal
            f.replay = {"confirmed": False, "detail": f"replay failed: {type(exc).__name__}: {exc}", "observed": {}}


def split_by_kernel(derived: dict[str, list[tuple]]) -> dict[int, dict[str, list[tuple]]]:
    out: dict[int, dict[str, list[tuple]]] = {}
    for rel, rows in derived.items():
        for row in rows:
            out.setdefault(row[0], {}).setdefault(rel, []).append(row)
    return out


def kernel_verdict(findings) -> Verdict:
    verdicts = {f.verdict for f in findings if f.counts}
    for v in (Verdict.ERROR, Verdict.VIOLATION, Verdict.UNKNOWN):
        if v in verdicts:
            return v
    return Verdict.VERIFIED


def read_sources(paths: list[str]) -> tuple[list[SourceFile], list[ErrorReport]]:
    sources, errors = [], []
    for p in paths:
        try:
            sources.append(SourceFile.read(p))
        except AveError as exc:
            errors.append(error_report(exc, None, p))
        except OSError as exc:
            errors.append(ErrorReport(p, "usage", f"cannot read {p}: {exc.strerror}", None,
                                      f"{p}: error: cannot read file: {exc.strerror}", int(ExitCode.USAGE)))
    return sources, errors
