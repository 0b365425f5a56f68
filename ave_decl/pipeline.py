"""The whole check, stage by stage: parse -> facts -> fixpoint -> obligations -> verdicts.

Each stage hands a plain value to the next; nothing reaches back. All kernels of one run share
one Datalog fixpoint (the kernel id is a column of every relation).
"""
from __future__ import annotations

import difflib
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from .datalog.engines import ENGINES, Engine, make_engine
from .datalog.program import Program, RuleFileMeta
from .datalog.ruleset import load_rules, rule_metadata
from .facts.kernel_facts import KernelFacts, merge
from .facts.locate import LOCATED_TYPES, Locator
from .facts.lower import lower_module
from .facts.view import KernelView
from .lang.depth import recursion_error
from .lang.errors import AveError, EngineTimeout, ExitCode, UsageError
from .lang.parser import parse_source
from .lang.parser import warm_up as warm_kernel_parser
from .lang.reference import check_references
from .lang.reference import warm_up as warm_reference_parser
from .lang.source import SourceFile
from .report.model import ErrorReport, KernelReport, Location, Report, Verdict
from .report.relations import RelationDump, RelationTuple
from .report.suppress import annotate, in_source_suppression
from .solver import fast_z3, proof_memo
from .solver.allocator import few_collections, keep_freed_memory
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
    print_relations: tuple[str, ...] = ()  # `--print-relation`: relations whose tuples are dumped
    proof_cache: str | None = None  # a folder whose proof file backs the proof memo (solver/proof_memo.py)
    max_errors: int | None = None  # `--max-errors`: stop deciding obligations after this many errors
    jobs: int = 1  # `--jobs`: processes deciding one kernel's obligations (solver/parallel.py)


@dataclass
class Frontend:
    kernels: list[KernelFacts] = field(default_factory=list)
    errors: list[ErrorReport] = field(default_factory=list)
    timings: dict[int, dict[str, float]] = field(default_factory=dict)
    # kernel id -> the Z3 context its derived facts were proved in, for its solver to go on in
    # (at most KEPT_CONTEXTS of them: see front_end)
    contexts: dict[int, object] = field(default_factory=dict)


# Why one: the solver going on in the derived facts' context saves rebuilding their terms
# (packed/gemm_packed_transpose 825 vs 907 ms, pipelines/gemm_pipelined3 600 vs 626 ms), but
# contexts kept alive together each fault in fresh pages (16 MB, ~7 ms) where a freed one's
# would be reused (~1 ms): an audit chunk that kept all 16 was slower than keeping none.
KEPT_CONTEXTS = 1


def error_report(exc: AveError, source: SourceFile | None, path: str) -> ErrorReport:
    loc = None
    if exc.span is not None and exc.span.line > 0:
        s = exc.span
        loc = Location.of(s)
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
        module = None
        try:
            t0 = time.perf_counter()
            module = parse_source(src)
            t1 = time.perf_counter()
            kernels = lower_module(module, src, kid)
            check_references(module)  # reference= is parsed by our own grammar (never run): exit 3 if bad
            for kf in kernels:
                context = add_semantic_facts(kf)
                if len(out.contexts) < KEPT_CONTEXTS:
                    out.contexts[kf.kid] = context
                del context  # the others are freed now, their pages reused by the next kernel's
                out.timings[kf.kid] = {"parse": (t1 - t0) * 1000 / len(kernels),
                                       "facts": (time.perf_counter() - t1) * 1000 / len(kernels)}
            out.kernels.extend(kernels)
            kid += len(kernels)
        except AveError as exc:
            out.errors.append(error_report(exc, src, src.path))
        except RecursionError:  # a walk the nesting bound does not cover: still a located front-end error
            out.errors.append(error_report(recursion_error(src.path, module), src, src.path))
        except Exception as exc:  # noqa: BLE001 - one bad kernel never stops a batch
            out.errors.append(internal_error(exc, src.path))
    return out


def warm_up(opts: Options) -> None:
    """Build now what every check builds on its first use in a process: the rule program (read
    from its cache) and the engine's text of it, the parsers and their lexers' scanners. Why:
    an audit forks a worker per chunk; built once in the parent, every worker inherits them
    instead of building them again (about 100 ms per chunk). A rule or engine error is left
    for the checks to report."""
    try:
        make_engine(opts.engine, load_rules(opts.rules_dirs))
    except AveError:
        pass
    warm_kernel_parser()
    warm_reference_parser()


def run(sources: list[SourceFile], opts: Options, read_errors: list[ErrorReport] | None = None,
        relations: list[RelationDump] | None = None) -> Report:
    """Check every kernel; with `opts.print_relations`, the tuples of those relations are
    appended to `relations` (one RelationDump per kernel and relation)."""
    proof_memo.MEMO.attach(proof_memo.store_path(opts.proof_cache) if opts.proof_cache else None)
    keep_freed_memory()  # fresh Z3 contexts reuse freed pages (solver/allocator.py)
    with fast_z3(), few_collections():
        return _run(sources, opts, read_errors, relations)


def _run(sources: list[SourceFile], opts: Options, read_errors: list[ErrorReport] | None,
         relations: list[RelationDump] | None) -> Report:
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
    printing = check_relation_names(prog, opts.print_relations)
    fe = front_end(sources)
    report.errors.extend(fe.errors)
    if not fe.kernels:
        return report
    t0 = time.perf_counter()
    try:
        with printing_engine(opts.engine, prog, engine, printing) as fixpoint:
            derived = fixpoint.run(merge(fe.kernels), timeout=opts.engine_timeout_s)
    except EngineTimeout as exc:
        for kf in fe.kernels:
            report.kernels.append(KernelReport(kf.name, kf.source.path, Verdict.UNKNOWN, [], 0, {}))
        report.errors.append(error_report(exc, None, "<engine>"))
        return report
    except AveError as exc:
        report.errors.append(error_report(exc, None, "<rules>"))
        return report
    fixpoint_ms = (time.perf_counter() - t0) * 1000 / len(fe.kernels)
    if printing:
        dumps = dump_relations(prog, fe.kernels, derived, printing)
        if relations is not None:
            relations.extend(dumps)
        derived = {rel: rows for rel, rows in derived.items() if rel in prog.outputs}
    by_kernel = split_by_kernel(derived)
    meta = rule_metadata(prog)
    for kf in fe.kernels:
        timings = dict(fe.timings.get(kf.kid, {}))
        timings["fixpoint"] = fixpoint_ms
        t1 = time.perf_counter()
        try:
            solver = KernelSolver(KernelView.of(kf), by_kernel.get(kf.kid, {}), meta, opts.timeout_s,
                                  opts.violation_sets, opts.max_errors,
                                  lambda f, src=kf.source: in_source_suppression(f, src) is not None,
                                  context=fe.contexts.pop(kf.kid, None), jobs=opts.jobs)  # context: freed with it
            findings = solver.findings()
        except AveError as exc:  # e.g. a rule asking for 'rel' at a site that is not an assert_tag
            report.errors.append(error_report(exc, None, kf.source.path))
            continue
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
                                           sum(1 for f in findings), timings, solver.unchecked))
    return report


def invariant_metadata(rules_dirs: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """Invariant id -> header fields of the rule set (core plus `rules_dirs`)."""
    return rule_metadata(load_rules(rules_dirs))


def derive(sources: list[SourceFile], opts: Options, names: tuple[str, ...]) -> tuple[list[RelationDump],
                                                                                 list[ErrorReport]]:
    """Only the first stages: parse, facts, the fixpoint of the core rules plus `opts.rules_dirs`,
    then the tuples of `names` per kernel; no obligation is solved. Why: a planner's precondition
    is a Datalog query over a kernel's facts and derived relations, asked for every candidate; the
    solver's cost would be paid for nothing. Errors (front end, rules, engine) come back as reports."""
    errors: list[ErrorReport] = []
    try:
        prog = load_rules(opts.rules_dirs)
        engine = make_engine(opts.engine, prog)
        printing = check_relation_names(prog, names)
    except AveError as exc:
        return [], [error_report(exc, None, str(exc.span.path) if exc.span else "<rules>")]
    fe = front_end(sources)
    errors.extend(fe.errors)
    if not fe.kernels:
        return [], errors
    try:
        with fast_z3(), printing_engine(opts.engine, prog, engine, printing) as fixpoint:
            derived = fixpoint.run(merge(fe.kernels), timeout=opts.engine_timeout_s)
    except AveError as exc:
        return [], errors + [error_report(exc, None, "<engine>")]
    return dump_relations(prog, fe.kernels, derived, printing), errors


def confirm_findings(kf: KernelFacts, findings) -> None:
    """Replay every counterexample in the simulator (`--confirm`). A violation whose counterexample
    the simulator does not reproduce is not a confirmed violation: it becomes UNKNOWN for its
    obligation, with the replay's reason, and keeps its counterexample for inspection."""
    from dataclasses import asdict

    from .sim.replay import replay

    for f in findings:
        if f.counterexample is None or f.severity != "error":  # performance warnings are not replayed
            continue
        try:
            f.replay = asdict(replay(kf.source, kf.name, f))
        except Exception as exc:  # noqa: BLE001 - a replay failure is reported, never fatal
            f.replay = {"confirmed": False, "detail": f"replay failed: {type(exc).__name__}: {exc}", "observed": {}}
        if f.verdict == Verdict.VIOLATION and not f.replay["confirmed"]:
            f.verdict = Verdict.UNKNOWN
            f.reason = f"the simulator did not reproduce the counterexample: {f.replay['detail']}"
            f.message = f"not confirmed (the simulator did not reproduce the counterexample): {f.message}"


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


# ------------------------------------------------------------ --print-relation
def check_relation_names(prog: Program, names: tuple[str, ...]) -> tuple[str, ...]:
    """The requested relations, each once; an unknown name is a usage error naming close ones."""
    for name in names:
        if name not in prog.decls:
            close = difflib.get_close_matches(name, sorted(prog.decls), n=5, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}?" if close else \
                "docs/facts.md lists the facts, rules/*.dl the derived relations"
            raise UsageError(f"--print-relation: unknown relation {name!r} ({hint})")
    return tuple(dict.fromkeys(names))


@contextmanager
def printing_engine(name: str, prog: Program, engine: Engine, printing: tuple[str, ...]) -> Iterator[Engine]:
    """The engine, or one that also outputs the requested relations that are neither inputs nor
    outputs: Soufflé writes only `.output` relations, so they get a generated `.output` file
    (removed on every exit path)."""
    extra = sorted(r for r in printing if r not in prog.outputs and r not in prog.inputs)
    if not extra:
        yield engine
        return
    with tempfile.TemporaryDirectory(prefix="ave-print-") as tmp:
        path = Path(tmp) / "print_relation.dl"
        path.write_text(f".output {', '.join(extra)}\n", encoding="utf-8")
        yield make_engine(name, replace(prog, outputs=prog.outputs | set(extra),
                                        files=[*prog.files, RuleFileMeta(str(path))]))


def _type_chain(prog: Program, typ: str) -> list[str]:
    chain = [typ]
    while chain[-1] in prog.types and prog.types[chain[-1]] not in chain:
        chain.append(prog.types[chain[-1]])
    return chain


def dump_relations(prog: Program, kernels: list[KernelFacts], derived: dict[str, list[tuple]],
                   names: tuple[str, ...]) -> list[RelationDump]:
    """Per kernel and relation, its tuples (facts for input relations, the fixpoint's otherwise)
    with locations for Stmt/Access/Value columns and text for ExprId columns. A relation whose
    first column is not the kernel (`k` / type Kernel) is dumped once, after the kernels."""
    def rows_of(rel: str) -> list[tuple]:
        if rel in prog.inputs:
            return [row for kf in kernels for row in kf.relation(rel)]
        return list(derived.get(rel, []))

    def ordered(rows: list[tuple]) -> list[tuple]:
        return sorted(rows, key=lambda r: tuple((0, v, "") if isinstance(v, int) else (1, 0, str(v)) for v in r))

    keyed, unkeyed = [], []
    for rel in names:
        attrs = prog.decls[rel].attrs
        first = attrs[0] if attrs else None
        is_keyed = first is not None and (first[0] == "k" or "Kernel" in _type_chain(prog, first[1]))
        (keyed if is_keyed else unkeyed).append(rel)
    out: list[RelationDump] = []
    for kf in kernels:
        locator = Locator(kf)
        for rel in keyed:
            attrs = prog.decls[rel].attrs
            kinds = [next((t for t in _type_chain(prog, typ) if t in LOCATED_TYPES), None) for _, typ in attrs]
            dump = RelationDump(rel, kf.name, kf.source.path, [n for n, _ in attrs], [t for _, t in attrs])
            for row in ordered([r for r in rows_of(rel) if r and r[0] == kf.kid]):
                spans = [locator.span(kind, v) if kind in ("Stmt", "Access", "Value") else None
                         for kind, v in zip(kinds, row)]
                dump.tuples.append(RelationTuple(
                    list(row), [None if s is None else Location.of(s)
                                for s in spans],
                    [locator.expr(v) if kind == "ExprId" else None for kind, v in zip(kinds, row)]))
            out.append(dump)
    for rel in unkeyed:
        attrs = prog.decls[rel].attrs
        dump = RelationDump(rel, None, None, [n for n, _ in attrs], [t for _, t in attrs])
        dump.tuples = [RelationTuple(list(row), [None] * len(row), [None] * len(row)) for row in ordered(rows_of(rel))]
        out.append(dump)
    return out


def start_learning() -> None:
    """Record the proofs and violations' models this process learns from now on (an audit
    chunk's child; solver/proof_memo.py)."""
    proof_memo.MEMO.start_journal()


def learned_proofs() -> proof_memo.Learned:
    return proof_memo.MEMO.journal()


def learn_proofs(learned: proof_memo.Learned) -> None:
    """Take what another process learned, so the processes forked from this one start with it."""
    proof_memo.MEMO.learn(learned)
