"""Ave: a verifier for data-flow invariants of GPU tile kernels.

`check(...)` is the Python API for agent loops and tests: it returns the same structured
Report that `ave check --json` prints, and never prints or exits.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

from .report.model import Counterexample, Finding, KernelReport, Report, Verdict
from .version import __version__

__all__ = ["check", "Report", "KernelReport", "Finding", "Counterexample", "Verdict", "__version__"]


def check(source_or_path: str | PathLike | list[str | PathLike], *, engine: str = "embedded",
          timeout: float = 10.0, rules: tuple[str, ...] | list[str] = (), path: str = "<string>",
          violation_sets: bool = True, confirm: bool = False) -> Report:
    """Verify kernels given as file paths, or as `.ave` source text (named by `path`)."""
    from .lang.source import SourceFile
    from .pipeline import Options, read_sources, run

    opts = Options(engine=engine, timeout_s=timeout, rules_dirs=tuple(str(r) for r in rules),
                   violation_sets=violation_sets, confirm=confirm)
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
