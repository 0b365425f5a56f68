"""One candidate's evaluation in a repair loop: calls of the verifier and of the reference run,
each counted, up to a budget.

A call is one `ave_decl.check` or one run at one set of sizes (the host run by default; the
guidance bench passes the simulator). Every call counts, in every mode, a pre-screen included:
the budget is the number of calls. A call is made only when something reads its answer: the
mode's feedback or the acceptance gate (VERIFIED, and the output matches the reference at two
sizes). So the gates run in an order per mode and stop at the first failure: `result`-like
modes run the reference first (their feedback is the run), `invariant` modes `check` first (the
pre-screen: a candidate that still fails an obligation is never run). `CallCache` keeps answers
across repairs of the same bug (the experiment's modes), so a call answered from it still counts
and is charged the seconds it took when it was made.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import ave_decl

CANDIDATE_PATH = "candidate.ave"  # every call names a candidate so: the front end parses it once
RunFn = Callable[[str, dict], dict]  # (text, sizes) -> {"ok", "error", "max_abs", "mismatched", "elements", ...}
CHECK_FIRST = ("invariant", "invariant-site")
MAX_FINDINGS = 3  # error findings a candidate's feedback shows: `check` stops deciding after them


class BudgetExhausted(Exception):
    """The next call would exceed the evaluation budget."""


@dataclass
class Evaluation:
    """Everything the feedback modes read about one candidate (None: that call was not made)."""

    text: str
    check: dict | None = None  # {"verdict", "error", "findings": [error findings as report JSON]}
    run_a: dict | None = None  # the reference run at the first sizes
    run_b: dict | None = None  # ... and at the second (only after everything else passed)
    estimate_s: float | None = None  # the performance model's estimate (result+perf)
    calls: list[str] = field(default_factory=list)  # the calls made for it, in order

    @property
    def verified(self) -> bool:
        return bool(self.check and self.check["verdict"] == "VERIFIED")

    @property
    def accepted(self) -> bool:
        return self.verified and bool(self.run_a and self.run_a.get("ok")) and bool(self.run_b and self.run_b.get("ok"))


def check_summary(text: str, timeout: float = 10.0, max_errors: int | None = None) -> dict:
    """The parts of `ave check`'s report a repair reads: the verdict, a front-end error, and the
    failing error-severity findings (report JSON, counterexamples included). `max_errors`: only
    the first that many are sure to be there (`ave check --max-errors`: the verdict and those
    findings are the full check's, the later obligations are not decided)."""
    report = ave_decl.check(text, path=CANDIDATE_PATH, timeout=timeout, violation_sets=False, max_errors=max_errors)
    data = report.to_json(timings=False)
    if report.errors or not report.kernels:
        e = data["errors"][0] if data.get("errors") else {"message": "no kernel"}
        return {"verdict": "ERROR", "error": e.get("rendered", e.get("message", "")).split("\n")[0], "findings": []}
    k = data["kernels"][0]
    bad = [f for f in k["findings"] if f["severity"] == "error" and f["verdict"] != "VERIFIED"]
    return {"verdict": k["verdict"], "error": None, "findings": bad}


def host_run(text: str, sizes: dict) -> dict:
    """The default reference run: the kernel compiled for the host CPU (ave_decl.run)."""
    from ave_decl.lang.errors import AveError

    try:
        (run,) = ave_decl.run(text, sizes=sizes, target="host", unverified=True, path=CANDIDATE_PATH)
    except AveError as exc:
        return {"ok": False, "error": exc.one_line()}
    return {"ok": bool(run.ok), "error": None, **(run.comparison or {})}


class CallCache:
    """(kind, sizes, text) -> (answer, seconds it took): shared by the modes of one bug."""

    def __init__(self) -> None:
        self.answers: dict[tuple, tuple[dict, float]] = {}

    def get(self, key: tuple, make: Callable[[], dict]) -> tuple[dict, float]:
        if key not in self.answers:
            t0 = time.perf_counter()
            answer = make()
            self.answers[key] = (answer, time.perf_counter() - t0)
        return self.answers[key]


class Evaluator:
    def __init__(self, sizes_a: dict, sizes_b: dict, budget: int, run: RunFn = host_run,
                 cache: CallCache | None = None, timeout: float = 10.0, device: str | None = None):
        self.sizes_a, self.sizes_b, self.budget, self._run = dict(sizes_a), dict(sizes_b), budget, run
        self.cache, self.timeout, self.device = cache or CallCache(), timeout, device
        self.calls = 0
        self.seconds = 0.0  # the seconds of the calls made (as measured when each was first made)
        self._made: dict[tuple, dict] = {}  # calls made in this repair: asked again, not counted again

    def _call(self, key: tuple, make: Callable[[], dict]) -> dict:
        if key in self._made:
            return self._made[key]
        if self.calls >= self.budget:
            raise BudgetExhausted()
        self.calls += 1
        answer, seconds = self.cache.get(key, make)
        self.seconds += seconds
        self._made[key] = answer
        return answer

    def check(self, text: str) -> dict:
        return self._call(("check", text), lambda: check_summary(text, self.timeout, MAX_FINDINGS))

    def run(self, text: str, which: str) -> dict:
        sizes = self.sizes_a if which == "a" else self.sizes_b
        return self._call(("run", tuple(sorted(sizes.items())), text), lambda: self._run(text, sizes))

    def estimate(self, text: str) -> float | None:
        """The performance model's estimate at the first sizes: not a call of the verifier or of
        the reference run, so never counted (and memoised with the calls' answers)."""
        key = ("estimate", self.device, tuple(sorted(self.sizes_a.items())), text)
        return self.cache.get(key, lambda: {"s": _estimate(text, self.sizes_a, self.device)})[0]["s"]

    def evaluate(self, text: str, mode: str) -> Evaluation:
        """The gates in the mode's order, stopping at the first failure (BudgetExhausted when a
        call is over the budget; the calls made so far stay counted)."""
        ev = Evaluation(text)

        def check() -> bool:
            ev.calls.append("check")
            ev.check = self.check(text)
            return ev.verified

        def run_a() -> bool:
            ev.calls.append("run")
            ev.run_a = self.run(text, "a")
            if mode == "result+perf" and self.device and not ev.run_a.get("error"):
                ev.estimate_s = self.estimate(text)
            return bool(ev.run_a.get("ok"))

        if all(gate() for gate in ((check, run_a) if mode in CHECK_FIRST else (run_a, check))):
            ev.calls.append("run")
            ev.run_b = self.run(text, "b")
        return ev


def _estimate(text: str, sizes: dict, device: str) -> float | None:
    from .model import estimate

    try:
        return estimate(text, sizes, device, path=CANDIDATE_PATH).seconds
    except Exception:  # noqa: BLE001 - a kernel the model cannot read has no estimate
        return None
