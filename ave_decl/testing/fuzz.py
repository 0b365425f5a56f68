"""`ave fuzz`: property-based testing of a kernel transformation (AST -> AST) with Hypothesis.

For every drawn kernel the transformed kernel must (1) print and parse back to the same AST,
(2) verify without a VIOLATION or ERROR the input did not have, and (3) compute the same outputs
as the input on the same random data. Hypothesis shrinks a failure to a small kernel; it is
written to the output directory as `.ave` files with the counterexample or the output diff, and
the same `--seed` reproduces the run.
"""
from __future__ import annotations

import functools
import importlib
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

from .. import check
from ..lang import ast as A
from ..lang import printer
from ..lang.errors import AveError
from ..lang.parser import parse_text
from ..lang.source import SourceFile
from ..report.model import Verdict
from ..sim.run import simulate_source
from .strategies import KernelCase, gemm_kernels

Transform = Callable[[A.Module], A.Module]
VERIFY_TIMEOUT_S = 10.0  # per solver query, as `ave check`: a query that times out only under load would hide a bug


@dataclass
class Failure:
    kind: str  # print | verify | simulate | crash
    message: str
    case: KernelCase
    output_text: str = ""
    detail: str = ""


@dataclass
class FuzzResult:
    examples: int = 0
    failure: Failure | None = None
    written: list[Path] = field(default_factory=list)


def load_transform(spec: str) -> Transform:
    """`module:function` (a file path module is resolved from the working directory)."""
    module_name, _, func = spec.partition(":")
    if not func:
        raise ValueError("--transform takes module:function")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name).resolve()
        sys.path.insert(0, str(path.parent))
        module_name = path.stem
    else:
        sys.path.insert(0, str(Path.cwd()))
    return getattr(importlib.import_module(module_name), func)


def _bad(report) -> set[tuple[str, str, int]]:
    """(invariant, verdict, line-independent id) of findings that are not VERIFIED, plus errors."""
    out = {(f.invariant, f.verdict.value, f.message.split(":")[0]) for k in report.kernels for f in k.findings
           if f.verdict in (Verdict.VIOLATION, Verdict.ERROR) and f.counts}
    out |= {("error", e.kind, 0) for e in report.errors}  # type: ignore[arg-type]
    return {(a, b, 0) for a, b, _ in out}


@functools.lru_cache(maxsize=256)
def _verify(text: str, path: str):
    """Shrinking re-checks the same kernels many times: remember the reports."""
    return check(text, path=path, violation_sets=False, timeout=VERIFY_TIMEOUT_S)


def check_transformation(case: KernelCase, transform: Transform, simulate: bool = True) -> Failure | None:
    try:
        out_module = transform(case.module)
    except Exception as exc:  # noqa: BLE001 - the user's transformation crashed
        return Failure("crash", f"the transformation raised {type(exc).__name__}: {exc}", case)
    text = printer.module(out_module)
    try:
        if parse_text(text, "transformed.ave") != out_module:
            return Failure("print", "the transformed kernel does not print and parse back to the same AST", case,
                           text)
    except AveError as exc:
        return Failure("print", f"the transformed kernel does not parse: {exc.one_line()}", case, text)
    before, after = _verify(case.text, "input.ave"), _verify(text, "output.ave")
    new = _bad(after) - _bad(before)
    if new:
        detail = "\n".join(f"{f.invariant} at line {f.location.line}: {f.message}"
                           for k in after.kernels for f in k.findings if f.verdict == Verdict.VIOLATION and f.counts)
        detail += "".join(f"\n{e.message}" for e in after.errors)
        return Failure("verify", f"the transformation introduced: {sorted(n[0] for n in new)}", case, text, detail)
    if not simulate:
        return None
    # one block is enough for this kernel family (every block runs the same code on its own tile)
    ((_, r_in),) = simulate_source(SourceFile("input.ave", case.text), case.sizes, shadow=False,
                                   block_prefix=(0, 0, 0))
    ((_, r_out),) = simulate_source(SourceFile("output.ave", text), case.sizes, shadow=False,
                                    block_prefix=(0, 0, 0))
    for name, expected in r_in.outputs.items():
        got = r_out.outputs.get(name)
        if got is None or got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-4, atol=1e-4):
            diff = float(np.max(np.abs(got - expected))) if got is not None and got.shape == expected.shape else None
            return Failure("simulate", f"output {name} differs after the transformation (max abs diff {diff})",
                           case, text)
    return None


def fuzz(transform: Transform, examples: int = 25, seed_value: int = 0, out_dir: Path | None = None,
         simulate: bool = True) -> FuzzResult:
    result = FuzzResult()
    failures: list[Failure] = []

    @seed(seed_value)
    # no "explain" phase: it re-verifies hundreds of variants of the shrunk kernel to name the
    # lines that matter, which the written failure files already show
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False, print_blob=False,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink])
    @given(gemm_kernels(naive=False))
    def prop(case: KernelCase) -> None:
        result.examples += 1
        failure = check_transformation(case, transform, simulate)
        if failure is not None:
            failures.append(failure)
            raise AssertionError(failure.message)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Hypothesis' note on large reprs of drawn kernels
            prop()
    except AssertionError:
        result.failure = failures[-1]  # Hypothesis replays the shrunk example last
    if result.failure is not None and out_dir is not None:
        result.written = write_failure(result.failure, out_dir, seed_value)
    return result


def write_failure(f: Failure, out_dir: Path, seed_value: int) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "input.ave", out_dir / "output.ave", out_dir / "failure.txt"]
    files[0].write_text(f.case.text)
    files[1].write_text(f.output_text)
    sizes = ",".join(f"{k}={v}" for k, v in f.case.sizes.items())
    files[2].write_text(f"kind: {f.kind}\nmessage: {f.message}\nsizes: {sizes}\nseed: {seed_value}\n"
                        f"spec: {f.case.spec}\n\n{f.detail}\n")
    return files
