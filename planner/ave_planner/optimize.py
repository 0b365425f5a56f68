"""The episode loop of `ave optimize`: precondition queries -> planner -> episode -> record."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import ave_decl

from .episode import Episode, Settings, measure, run_episode, write_episode, write_whole
from .errors import KernelError
from .knowledge import Technique
from .model import Estimate, estimate
from .policy import History, arm_key
from .preconditions import applicable
from .rewrites import Candidate, recognise


@dataclass
class Result:
    start_estimate: Estimate
    best: Candidate
    best_estimate: Estimate
    episodes: list[Episode] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # choices whose rewrite did not apply
    measuring: str = ""  # why accepted kernels were not timed on a GPU ("" when they were)


def optimize(text: str, path: str, techniques: dict[str, Technique], planner, settings: Settings, budget: int,
             history: History, out: Path | None = None, progress: Callable[[Episode], None] | None = None,
             rewrites: dict | None = None) -> Result:
    """Up to `budget` episodes from the kernel `text`; `rewrites` (default: ave_planner.rewrites.REWRITES)
    resolves the techniques' `rewrite` names."""
    report = ave_decl.check(text, path=path, timeout=settings.timeout_s, violation_sets=False, engine=settings.engine)
    if report.errors:
        raise KernelError(report.errors[0].message, path)
    if not report.kernels or report.kernels[0].verdict.value != "VERIFIED" or len(report.kernels) != 1:
        raise KernelError("the kernel to optimize must be one kernel that ave check says is VERIFIED", path)
    if out is not None:
        clear_episodes(out)
    current = Candidate(text, recognise(text, path))
    cur_est = start = estimate(text, settings.sizes, settings.device, settings.backend_resources)
    usable = [t for t in techniques.values() if settings.target in t.targets]
    tried: set[str] = set()
    result = Result(start, current, start)
    index = 0
    held = applicable(current.text, usable, settings.engine, path)
    while index < budget:
        choice = planner.choose([t for t in usable if t.id in held], tried, history, settings.target)
        if choice is None:
            break
        technique, params = choice
        tried.add(arm_key(technique.id, params))
        outcome = run_episode(index + 1, current, cur_est, technique, params, settings, rewrites)
        ep = outcome.episode
        if ep.outcome == "not applicable":  # costs no episode: nothing was built or checked
            result.skipped.append({"technique": technique.id, "params": dict(params)})
            continue
        index += 1
        if ep.outcome == "accepted" and settings.measure and not result.measuring:
            ep.measured_s, why, present = measure(outcome.candidate.text, settings)  # type: ignore[union-attr]
            if not present:
                result.measuring = why  # no device: no later attempt
            elif ep.measured_s is None:  # the GPU disagrees with the reference: not accepted
                ep.outcome, ep.gate, ep.reason = "rejected", "gpu", why
        if ep.outcome == "accepted":
            current, cur_est, tried = outcome.candidate, outcome.estimate, set()  # type: ignore[assignment]
            ep.speedup = start.seconds / cur_est.seconds
            held = applicable(current.text, usable, settings.engine, path)
        result.episodes.append(ep)
        history.add({**ep.to_json(), "kernel": Path(path).name, "target": settings.target})
        if out is not None:
            write_episode(out, outcome)
        if progress is not None:
            progress(ep)
    result.best, result.best_estimate = current, cur_est
    if out is not None:
        write_whole(out / "best.ave", current.text)
        write_whole(out / "trajectory.json", json.dumps({
            "kernel": path, "target": settings.target, "device": settings.device, "sizes": settings.sizes,
            "gate_sizes": settings.gate_sizes, "planner": planner.name, "budget": budget,
            "start_estimate_s": start.seconds, "best_estimate_s": cur_est.seconds,
            "measured": ("not requested" if not settings.measure else result.measuring
                         or ("on the target's GPU" if any(e.measured_s for e in result.episodes)
                             else "nothing accepted")),
            "episodes": [e.to_json() for e in result.episodes], "not_applicable": result.skipped},
            indent=2, sort_keys=True))
    return result


def clear_episodes(out: Path) -> None:
    """Episode directories of an earlier run into the same OUT (those holding an episode.json):
    a shorter run would otherwise leave stale ones beside its own trajectory."""
    import shutil

    for d in sorted(out.glob("episode-*")):
        if d.is_dir() and (d / "episode.json").is_file():
            shutil.rmtree(d)
