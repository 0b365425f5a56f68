"""Emit and run verified kernels: the bridge from the verifier to the backends.

`compile_source` lowers every kernel of a file for a backend up to a stage; `run_source` also
launches it on random inputs (the simulator's, sim/inputs.py) and compares the output with the
kernel's reference. Both refuse a kernel the verifier does not call VERIFIED unless told
`unverified=True`: emitted code is only as trustworthy as the proof behind it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .codegen import Backend, CompiledKernel, get_backend
from .codegen.dtypes import NUMPY_STORAGE
from .codegen.uniform import barrier_under_warp_condition
from .lang import ast as A
from .lang.consts import const_int
from .lang.errors import AveError, ExitCode, FrontEndError, UsageError
from .lang.parser import parse_source
from .lang.reference import check_references
from .lang.resolve import resolve_imports
from .lang.source import SourceFile


class NotVerified(AveError):
    """The verifier did not prove the kernel; emitting it needs --unverified."""

    kind = "not-verified"

    def __init__(self, message: str, span, exit_code: ExitCode):
        super().__init__(message, span)
        self.exit_code = exit_code


class PipelineError(AveError):
    """An error the verifier reported for the file (front end, rules), with its own exit code."""

    def __init__(self, error) -> None:
        super().__init__(error.message)
        self.exit_code = ExitCode(error.exit_code)
        self.kind = error.kind
        self.line = (error.rendered or error.message).splitlines()[0]

    def one_line(self) -> str:
        return self.line


@dataclass
class KernelRun:
    kernel: str
    target: str
    sizes: dict[str, int]
    ok: bool | None  # None: the kernel declares no reference
    comparison: dict = field(default_factory=dict)  # sim.reference.compare's fields
    compile_s: float = 0.0
    run_s: float = 0.0
    verdict: str = ""


@dataclass(frozen=True)
class Gate:
    """What the verifier said of a kernel before it is compiled."""

    verdict: str  # VERIFIED, VIOLATION, UNKNOWN, or `unchecked` under --unverified
    barriers_proven: bool  # ave/barrier-divergence holds: wave-specialized barriers may be compiled
    why: str = ""  # the first counting finding that is not VERIFIED, as `invariant at line N`


BARRIER_INVARIANT = "ave/barrier-divergence"
NOT_CHECKED = Gate("UNKNOWN", False)


def _verdicts(src: SourceFile, timeout: float) -> dict[str, Gate]:
    """What the verifier says of every kernel of the file."""
    from .pipeline import Options, run

    report = run([src], Options(timeout_s=timeout, violation_sets=False), [])
    for e in report.errors:
        raise PipelineError(e)
    out = {}
    for k in report.kernels:
        first = next((f for f in k.findings if f.counts and f.verdict.value != "VERIFIED"), None)
        why = f"{first.invariant} at line {first.location.line}" if first is not None else ""
        barriers = [f.verdict.value for f in k.findings if f.invariant == BARRIER_INVARIANT]
        out[k.kernel] = Gate(k.verdict.value, bool(barriers) and set(barriers) == {"VERIFIED"}, why)
    return out


def _gate(src: SourceFile, kernels: list[A.Kernel], unverified: bool, timeout: float) -> dict[str, Gate]:
    if unverified:  # the verdict is ignored, never the front end's checks (names, ranks, arities, types)
        from .pipeline import front_end

        for e in front_end([src]).errors:
            raise PipelineError(e)
        # a barrier under a wave-dependent `if` hangs the block unless every wave reaches it: that
        # one proof is still needed (and only then is the verifier run)
        needs = any(barrier_under_warp_condition(k.body) is not None for k in kernels)
        proofs = _verdicts(src, timeout) if needs else {}
        proven = {k.name: proofs.get(k.name, NOT_CHECKED).barriers_proven for k in kernels}
        return {k.name: Gate(f"unchecked{f' ({BARRIER_INVARIANT} proven)' if proven[k.name] else ''}", proven[k.name])
                for k in kernels}
    verdicts = _verdicts(src, timeout)
    for k in kernels:
        gate = verdicts.get(k.name, NOT_CHECKED)
        if gate.verdict != "VERIFIED":
            code = ExitCode.VIOLATION if gate.verdict == "VIOLATION" else ExitCode.INCONCLUSIVE
            detail = f" ({gate.why})" if gate.why else ""
            raise NotVerified(f"refusing to compile {k.name}: the verifier says {gate.verdict}{detail}; `ave check` "
                              f"shows why, --unverified compiles it anyway", k.span, code)
    return {k.name: verdicts[k.name] for k in kernels}


def _select(module: A.Module, kernel: str | None, path: str) -> list[A.Kernel]:
    if not module.kernels:
        raise FrontEndError("the file defines no kernel (a `@kernel(...)` function)")
    chosen = [k for k in module.kernels if kernel is None or k.name == kernel]
    if not chosen:
        raise UsageError(f"{path} has no kernel named {kernel[:40]!r}")  # type: ignore[index]
    return chosen


def compile_source(src: SourceFile, target: str, arch: str | None = None, stage: str | None = None,
                   kernel: str | None = None, unverified: bool = False, timeout: float = 10.0) -> list[CompiledKernel]:
    backend = get_backend(target)
    arch = backend.check_arch(arch)
    if stage is not None and stage not in backend.stages:
        raise UsageError(f"target {backend.name} has stages {', '.join(backend.stages)} (not {stage})")
    module = parse_source(src)
    imports = resolve_imports(module)
    kernels = _select(module, kernel, src.path)
    verdicts = _gate(src, kernels, unverified, timeout)  # after the cheap usage checks: no wasted proof
    out = []
    for k in kernels:
        compiled = backend.compile(k, imports, arch, stage, verdicts[k.name].barriers_proven)
        compiled.info.notes.append(f"verifier: {verdicts[k.name].verdict}")
        out.append(compiled)
    return out


# ------------------------------------------------------------------ running
def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values of an element type -> the bits a kernel reads (bf16/f16 as uint16)."""
    if dtype == "bf16":
        return values.astype(ml_dtypes.bfloat16).view(np.uint16)
    if dtype == "f16":
        return values.astype(np.float16).view(np.uint16)
    return values.astype(NUMPY_STORAGE[dtype])


def from_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return values.view(ml_dtypes.bfloat16).astype(np.float32)
    if dtype == "f16":
        return values.view(np.float16).astype(np.float32)
    return values.astype(np.float32)


def check_assumptions(k: A.Kernel, sizes: dict[str, int]) -> None:
    for s in k.body:
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == "assume":
            for a in s.expr.args:
                if const_int(a, sizes) == 0:
                    raise FrontEndError("the sizes violate assume(...)", a.span)


def launch_kernel(backend: Backend, compiled: CompiledKernel, k: A.Kernel, sizes: dict[str, int],
                  seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], float]:
    """Inputs (float32), outputs (float32) and the launch's wall time."""
    from .sim.inputs import random_inputs

    check_assumptions(k, sizes)
    inputs = random_inputs(k, sizes, seed)
    dtypes = {p.name: p.dtype for p in compiled.signature.tensors}
    arrays = {n: to_storage(v, dtypes[n]) for n, v in inputs.items()}
    t0 = time.perf_counter()
    raw = backend.launch(compiled, arrays, sizes)
    seconds = time.perf_counter() - t0
    return inputs, {n: from_storage(v, dtypes[n]) for n, v in raw.items()}, seconds


def run_source(src: SourceFile, target: str, sizes: dict[str, int], kernel: str | None = None, seed: int = 0,
               arch: str | None = None, unverified: bool = False, timeout: float = 10.0) -> list[KernelRun]:
    from .sim.reference import compare, evaluate_reference, reference_of

    backend = get_backend(target)
    arch = backend.check_arch(arch)
    problem = backend.device_available()
    if problem is not None:
        from .codegen.errors import NoDevice

        raise NoDevice(f"cannot run on target {target}: {problem}")
    module = parse_source(src)
    check_references(module)
    imports = resolve_imports(module)
    kernels = _select(module, kernel, src.path)
    verdicts = _gate(src, kernels, unverified, timeout)
    runs = []
    for k in kernels:
        t0 = time.perf_counter()
        compiled = backend.compile(k, imports, arch, backend.launch_stage,
                                   barriers_proven=verdicts[k.name].barriers_proven)
        backend.prepare(compiled)
        compile_s = time.perf_counter() - t0
        missing = [n for n in compiled.signature.sizes if n not in sizes]
        if missing:
            raise UsageError(f"give a value for size {missing[0]} (--sizes {missing[0]}=...)")
        inputs, outputs, run_s = launch_kernel(backend, compiled, k, sizes, seed)
        ref = reference_of(k)
        run = KernelRun(k.name, target, {n: sizes[n] for n in compiled.signature.sizes}, None,
                        compile_s=compile_s, run_s=run_s, verdict=verdicts[k.name].verdict)
        if ref is not None:
            expected = evaluate_reference(ref, inputs, run.sizes, outputs[ref.output].shape)
            run.comparison = compare(outputs[ref.output], expected, ref.tolerance)
            run.comparison["output"] = ref.output
            run.ok = bool(run.comparison["ok"])
        runs.append(run)
    return runs
