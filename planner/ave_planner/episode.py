"""One episode: a technique and its parameters -> rewrite -> gates -> a record.

The gates, in order, each a reason to reject: the rewrite applies; the invariant templates it
must insert are in the kernel; Ave says VERIFIED (a VIOLATION's counterexample is recorded for
the repair step); every invariant the technique names was proved (a VERIFIED obligation of it
exists, so the proof was not vacuous); the host run at the gate sizes matches the reference;
the model's estimate improves. A kernel that fails any gate is never accepted.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ave_decl
from ave_decl.lang.errors import AveError

from .knowledge import Technique
from .model import Estimate, estimate
from .rewrites import REWRITES, Candidate

MIN_GAIN = 1e-3  # an accepted step lowers the estimate by at least 0.1 %


@dataclass
class Settings:
    target: str
    device: str
    sizes: dict[str, int]  # where the model estimates
    gate_sizes: dict[str, int]  # where the host run compares with the reference
    timeout_s: float = 30.0
    engine: str = "embedded"
    measure: bool = True  # time accepted kernels on the target's GPU at `sizes` when one is present
    backend_resources: bool = True  # the model's occupancy from the target backend's compile when it runs here


@dataclass
class Episode:
    index: int
    technique: str
    params: dict
    outcome: str  # accepted | rejected | not applicable
    gate: str = ""  # the gate that rejected it
    reason: str = ""
    estimate_s: float | None = None
    speedup: float | None = None  # accepted: over the input kernel; otherwise over the kernel it started from
    step_speedup: float | None = None  # over the kernel it started from (the planner's reward)
    counterexample: dict | None = None
    measured_s: float | None = None  # the kernel's time on the target's GPU at the model's sizes

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Outcome:
    episode: Episode
    candidate: Candidate | None = None
    estimate: Estimate | None = None
    report: dict | None = field(default=None, repr=False)


def run_episode(index: int, current: Candidate, current_estimate: Estimate, technique: Technique, params: dict,
                s: Settings, rewrites: dict | None = None) -> Outcome:
    ep = Episode(index, technique.id, dict(params), "rejected")
    cand = (REWRITES if rewrites is None else rewrites)[technique.rewrite](current, {**params, "target": s.target})
    if cand is None:
        ep.outcome, ep.gate, ep.reason = "not applicable", "rewrite", "the rewrite does not apply to this kernel"
        return Outcome(ep)
    missing = [t for t in technique.templates if t not in cand.text]
    if missing:
        ep.gate, ep.reason = "templates", f"the rewrite did not insert {missing[0]!r}"
        return Outcome(ep, cand)
    allowed = max(declared_tolerance(current.text), technique.tolerance or 0.0)
    if declared_tolerance(cand.text) > allowed:
        ep.gate = "tolerance"
        ep.reason = (f"the rewritten kernel declares tolerance={declared_tolerance(cand.text):g}; the kernel it "
                     f"started from and the technique allow {allowed:g}")
        return Outcome(ep, cand)
    report = ave_decl.check(cand.text, path=f"{technique.id}.ave", timeout=s.timeout_s, violation_sets=False,
                            engine=s.engine, confirm=True)
    data = report.to_json(timings=False)
    if report.errors or not report.kernels:
        ep.gate, ep.reason = "check", report.errors[0].message if report.errors else "no kernel"
        return Outcome(ep, cand, report=data)
    k = report.kernels[0]
    if k.verdict.value != "VERIFIED":
        bad = next((i for i, f in enumerate(k.findings) if f.verdict.value != "VERIFIED" and f.severity == "error"),
                   None)
        ep.gate = "check"
        if bad is not None:
            f = k.findings[bad]
            ep.reason = f"{k.verdict.value}: [{f.invariant}] line {f.location.line}: {f.message}"
            found = data["kernels"][0]["findings"][bad]
            ep.counterexample = found.get("counterexample")
            if found.get("replay") is not None:
                ep.counterexample = {**(ep.counterexample or {}), "replay": found["replay"]}
        else:
            ep.reason = k.verdict.value
        return Outcome(ep, cand, report=data)
    proved = {f.invariant for f in k.findings if f.verdict.value == "VERIFIED"}
    unproved = [r for r in technique.must_prove if r not in proved]
    if unproved:
        ep.gate, ep.reason = "invariants", f"no VERIFIED obligation of {unproved[0]} in the rewritten kernel"
        return Outcome(ep, cand, report=data)
    try:
        (run,) = ave_decl.run(cand.text, sizes=s.gate_sizes, target="host", unverified=True,
                              path=f"{technique.id}.ave", timeout=s.timeout_s)
    except AveError as exc:  # a compile or run fault of the candidate
        ep.gate, ep.reason = "run", exc.one_line()
        return Outcome(ep, cand, report=data)
    if run.ok is None:
        ep.gate, ep.reason = "run", "the kernel declares no reference to compare with"
        return Outcome(ep, cand, report=data)
    if not run.ok:
        c = run.comparison
        ep.gate = "run"
        ep.reason = (f"the host output differs from the reference ({c.get('mismatched', '?')} of "
                     f"{c.get('elements', '?')} elements)")
        return Outcome(ep, cand, report=data)
    est = estimate(cand.text, s.sizes, s.device, s.backend_resources)
    ep.estimate_s = est.seconds
    ep.speedup = ep.step_speedup = current_estimate.seconds / est.seconds if est.seconds else None
    if est.seconds > current_estimate.seconds * (1 - MIN_GAIN):
        ep.gate, ep.reason = "model", f"no estimated improvement ({ep.speedup:.2f}x)"
        return Outcome(ep, cand, est, data)
    ep.outcome = "accepted"
    return Outcome(ep, cand, est, data)


DEFAULT_TOLERANCE = 1e-3


def declared_tolerance(text: str) -> float:
    """The reference tolerance the (first) kernel declares, or the default."""
    from ave_decl.lang import ast as A
    from ave_decl.lang.parser import parse_text

    k = parse_text(text, "<candidate>").kernels[0]
    value = next((kw.value for kw in k.decorator.kwargs if kw.name == "tolerance"), None)
    return float(value.value) if isinstance(value, (A.Float, A.Int)) else DEFAULT_TOLERANCE


def write_episode(out: Path, o: Outcome) -> None:
    """episode-NN/: the candidate kernel, its report, the model's estimate, the record."""
    import shutil

    d = out / f"episode-{o.episode.index:02d}-{o.episode.technique}"
    tmp = out / f".{d.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if o.candidate is not None:
        (tmp / "kernel.ave").write_text(o.candidate.text, encoding="utf-8")
    if o.report is not None:
        (tmp / "report.json").write_text(json.dumps(o.report, indent=2, sort_keys=True), encoding="utf-8")
    if o.estimate is not None:
        (tmp / "estimate.json").write_text(json.dumps(o.estimate.to_json(), indent=2, sort_keys=True),
                                           encoding="utf-8")
    (tmp / "episode.json").write_text(json.dumps(o.episode.to_json(), indent=2, sort_keys=True), encoding="utf-8")
    if d.exists():
        shutil.rmtree(d) if d.is_dir() else d.unlink()
    tmp.rename(d)


def write_whole(path: Path, text: str) -> None:
    """Written whole or not at all (a temporary file renamed into place)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def measure(text: str, s: Settings) -> tuple[float | None, str, bool]:
    """(time, why not, device present): the kernel's run time on the target's GPU at the model's
    sizes (the launcher's event timing), or None and why. A wrong output on the GPU is a failed
    gate for the caller (device present, no time)."""
    from ave_decl.codegen import NoDevice

    try:
        (run,) = ave_decl.run(text, sizes=s.sizes, target=s.target, unverified=True, path="measure.ave",
                              timeout=s.timeout_s)
    except NoDevice as exc:
        return None, f"no {s.target} device: {exc}", False
    except AveError as exc:
        return None, exc.one_line(), True
    if not run.ok:
        return None, f"the {s.target} output differs from the reference at the model's sizes", True
    return run.run_s, "", True
