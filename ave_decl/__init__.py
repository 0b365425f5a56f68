"""Ave: a verifier for data-flow invariants of GPU tile kernels.

`check(...)` is the Python API for agent loops and tests: it returns the same structured
Report that `ave check --json` prints, and never prints or exits. `emit(...)` compiles verified
kernels for a backend (docs/backends.md); `run(...)` also runs them and compares with the reference.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

from .report.model import Counterexample, Finding, KernelReport, Report, Verdict
from .version import __version__

__all__ = ["check", "relations", "invariants", "frozen_spec_changes", "emit", "run", "Report", "KernelReport", "Finding", "Counterexample", "Verdict", "__version__"]


def check(source_or_path: str | PathLike | list[str | PathLike], *, engine: str = "embedded",
          timeout: float = 10.0, rules: tuple[str, ...] | list[str] = (), path: str = "<string>",
          violation_sets: bool = True, confirm: bool = False, max_errors: int | None = None,
          jobs: int = 1) -> Report:
    """Verify kernels given as file paths, or as `.ave` source text (named by `path`). `max_errors`:
    stop deciding a kernel's obligations once its report has that many errors and a violation
    (an agent loop that reads only the first findings; `ave check --max-errors`). `jobs`: processes
    deciding a kernel's obligations (`ave check --jobs`; the same report for any number; 1 by
    default, as a caller that checks candidates side by side already uses the cores)."""
    from .lang.source import SourceFile
    from .pipeline import Options, read_sources, run

    opts = Options(engine=engine, timeout_s=timeout, rules_dirs=tuple(str(r) for r in rules),
                   violation_sets=violation_sets, confirm=confirm, max_errors=max_errors, jobs=jobs)
    items = source_or_path if isinstance(source_or_path, list) else [source_or_path]
    sources, errors = [], []
    for item in items:
        if isinstance(item, PathLike) or (isinstance(item, str) and "\n" not in item and Path(item).exists()):
            found, errs = read_sources([str(item)])
            sources += found
            errors += errs
        else:
            sources.append(SourceFile(path, str(item)))
    return run(sources, opts, errors)


def relations(source_or_path: str | PathLike, names: tuple[str, ...] | list[str], *, engine: str = "embedded",
              rules: tuple[str, ...] | list[str] = (), path: str = "<string>"):
    """The tuples of Datalog relations (facts or derived) for each kernel of one file, without
    solving any obligation: `(list of report.relations.RelationDump, list of ErrorReport)`.
    `rules` adds `.dl` files or directories to the core rules (how the planner asks its
    preconditions)."""
    from .pipeline import Options, derive

    opts = Options(engine=engine, rules_dirs=tuple(str(r) for r in rules))
    return derive([_source(source_or_path, path)], opts, tuple(names))


def invariants(rules: tuple[str, ...] | list[str] = ()) -> dict[str, dict[str, str]]:
    """Invariant id -> its rule file's header fields (title, severity, description, help), for
    the core library plus `rules`: what a plug-in may name as an obligation to be proved."""
    from .pipeline import invariant_metadata

    return invariant_metadata(tuple(str(r) for r in rules))


def frozen_spec_changes(original: str, candidate: str, *, original_path: str = "<original>",
                        path: str = "<string>") -> list:
    """What `candidate` (source text) changed of `original`'s frozen spec: its signature or
    launch, reference or tolerance, tags, assumes, assertions, tagged tensors (a list of
    lang.spec.SpecChange, empty: nothing). The API of `ave check --frozen-spec`, for agent loops
    that must reject reward hacking before evaluating; FrontEndError when either does not parse."""
    from .lang.spec import frozen_spec_changes as changes

    return changes(original, candidate, original_path, path)


def _source(source_or_path: str | PathLike, path: str):
    from .lang.source import SourceFile
    from .pipeline import read_sources

    if isinstance(source_or_path, PathLike) or ("\n" not in str(source_or_path) and Path(str(source_or_path)).exists()):
        found, errs = read_sources([str(source_or_path)])
        if errs:
            from .lang.errors import FrontEndError

            raise FrontEndError(errs[0].message)
        return found[0]
    return SourceFile(path, str(source_or_path))


def emit(source_or_path: str | PathLike, *, target: str = "nvptx", arch: str | None = None, stage: str | None = None,
         kernel: str | None = None, unverified: bool = False, path: str = "<string>", timeout: float = 10.0):
    """Compile the file's kernels (or the one named) for `target` up to `stage`; a list of
    codegen.CompiledKernel with one Artifact per stage. Raises AveError subclasses (each with
    its exit code): NotVerified unless the verifier says VERIFIED (or unverified=True)."""
    from .execute import compile_source

    return compile_source(_source(source_or_path, path), target, arch, stage, kernel, unverified, timeout)


def run(source_or_path: str | PathLike, *, sizes: dict[str, int], target: str = "host", kernel: str | None = None,
        seed: int = 0, arch: str | None = None, unverified: bool = False, path: str = "<string>", timeout: float = 10.0):
    """Compile, run on random inputs and compare with the reference: a list of execute.KernelRun."""
    from .execute import run_source

    return run_source(_source(source_or_path, path), target, sizes, kernel, seed, arch, unverified, timeout)
