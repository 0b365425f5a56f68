"""Planners: choose the next (technique, parameters) from the history of episodes.

`BanditPlanner` learns in context: each arm (technique, parameter choice) has a mean reward
(log of the estimated speed-up when accepted, a penalty when a gate rejected it) from this run
and from earlier runs' history (JSONL), and the next arm is the applicable, untried-on-this-kernel
one with the highest upper confidence bound (UCB1; ties by knowledge-base and domain order, so a
run is deterministic). `LLMPlanner` puts the knowledge-base entries and the history in a prompt
to any OpenAI-compatible endpoint (optional extra `llm`; `AVE_LLM_BASE_URL`, `AVE_LLM_MODEL`,
`OPENAI_API_KEY`), and falls back to the bandit when the answer is not a valid arm.
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

from .knowledge import Technique
from .llm_agent import endpoint

REJECT_REWARD = -0.5


def arms(t: Technique, target: str) -> list[dict]:
    """Every parameter choice of the technique for the target, the first value of each domain first."""
    if not t.parameters:
        return [{}]
    names = list(t.parameters)
    return [dict(zip(names, values)) for values in itertools.product(*(t.domain(n, target) for n in names))]


def arm_key(technique: str, params: dict) -> str:
    return technique + json.dumps(params, sort_keys=True)


def reward(episode: dict) -> float:
    step = episode.get("step_speedup", episode.get("speedup"))
    if episode["outcome"] == "accepted" and step:
        return math.log(step)
    return 0.0 if episode["outcome"] == "not applicable" else REJECT_REWARD


def _speedup_ok(v) -> bool:
    """Absent, or a finite positive number (a history file is untrusted input)."""
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0)


class History:
    """Episodes of this run and earlier ones (one JSON object per line; a bad line is skipped)."""

    def __init__(self, path: Path | None):
        self.path, self.episodes = path, []
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(e, dict) and isinstance(e.get("technique"), str) and isinstance(e.get("params"), dict) \
                        and e.get("outcome") in ("accepted", "rejected", "not applicable") \
                        and all(_speedup_ok(e.get(k)) for k in ("speedup", "step_speedup")):
                    self.episodes.append(e)

    def add(self, episode: dict) -> None:
        self.episodes.append(episode)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(episode, sort_keys=True) + "\n")


class BanditPlanner:
    """UCB1 at two levels: first the technique (its arms' rewards pooled, so a technique that
    keeps failing gives way to one not yet tried), then the parameter choice within it."""

    name = "builtin"

    def choose(self, applicable: list[Technique], tried: set[str], history: History, target: str):
        arm_stats: dict[str, list[float]] = {}
        tech_stats: dict[str, list[float]] = {}
        for e in history.episodes:
            arm_stats.setdefault(arm_key(e["technique"], e["params"]), []).append(reward(e))
            tech_stats.setdefault(e["technique"], []).append(reward(e))
        total = len(history.episodes) + 1

        def ucb(seen: list[float]) -> float:
            mean = sum(seen) / len(seen) if seen else 0.0
            return mean + math.sqrt(2 * math.log(total) / (len(seen) + 1))

        best, best_score = None, -math.inf
        for t in applicable:
            open_arms = [p for p in arms(t, target) if arm_key(t.id, p) not in tried]
            if not open_arms:
                continue
            score = ucb(tech_stats.get(t.id, []))
            if score > best_score + 1e-12:
                best, best_score = (t, open_arms), score
        if best is None:
            return None
        t, open_arms = best
        pick = max(open_arms, key=lambda p: (ucb(arm_stats.get(arm_key(t.id, p), [])), -open_arms.index(p)))
        return t, pick


class LLMPlanner:
    name = "llm"

    def __init__(self, fallback: BanditPlanner | None = None):
        self.fallback = fallback or BanditPlanner()

    def choose(self, applicable: list[Technique], tried: set[str], history: History, target: str):
        try:
            from openai import OpenAI
        except ImportError:
            return self.fallback.choose(applicable, tried, history, target)
        base_url, api_key, model = endpoint()
        client = OpenAI(base_url=base_url, api_key=api_key)
        recent = [{k: e.get(k) for k in ("technique", "params", "outcome", "gate", "reason", "speedup")}
                  for e in history.episodes[-30:]]
        prompt = ("You choose the next optimization of a GPU kernel for target " + target + ".\n"
                  "Techniques whose precondition holds:\n" + "\n".join(t.prompt(target) for t in applicable) +
                  "\nAlready tried on this kernel: " + json.dumps(sorted(tried)) +
                  "\nHistory: " + json.dumps(recent) +
                  '\nAnswer with JSON only: {"technique": "<id>", "params": {...}} using values from the domains.')
        try:
            answer = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}])
            choice = json.loads(answer.choices[0].message.content.strip().strip("`").removeprefix("json"))
            t = next(t for t in applicable if t.id == choice["technique"])
            p = {k: choice["params"][k] for k in t.parameters}
            if p in arms(t, target) and arm_key(t.id, p) not in tried:
                return t, p
        except Exception:  # noqa: BLE001 - any endpoint or parse failure: the bandit decides
            pass
        return self.fallback.choose(applicable, tried, history, target)


PLANNERS = {"builtin": BanditPlanner, "llm": LLMPlanner}
