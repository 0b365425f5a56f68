"""The LLM repair agent: the same interface as the search agent, answered by any OpenAI-compatible
endpoint (hosted, vLLM, llama.cpp server) through the `openai` client (the planner's optional
extra `llm`).

The prompts are files, one per feedback mode, in planner/prompts/ (docs/agent-guidance.md). An
answer is data: the agent takes the first fenced code block as the candidate kernel and never
executes anything; an answer without one is proposed as it is and fails its evaluation (which
counts). Tokens and cost are summed per proposal (`usage`; prices per million tokens from the
constructor or AVE_LLM_PRICE_IN / AVE_LLM_PRICE_OUT). Endpoint: AVE_LLM_BASE_URL, model:
AVE_LLM_MODEL, key: OPENAI_API_KEY (a local server needs none).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .agent import Feedback, Proposal, Task
from .knowledge import package_data

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", re.S)
MAX_ANSWER_CHARS = 200_000  # a longer answer is cut (a kernel file is far smaller)


def endpoint() -> tuple[str | None, str, str]:
    """(base URL, key, model) from the environment, as every LLM caller of the planner reads them.
    A local server needs no key, but the client refuses to start without one: a placeholder."""
    return (os.environ.get("AVE_LLM_BASE_URL"), os.environ.get("OPENAI_API_KEY") or "not-needed",
            os.environ.get("AVE_LLM_MODEL", "gpt-4o-mini"))


def endpoint_configured() -> bool:
    """Whether there is an endpoint to ask: OpenAI's (a key) or a server's address (the client
    also reads OPENAI_BASE_URL itself)."""
    return any(os.environ.get(v) for v in ("OPENAI_API_KEY", "AVE_LLM_BASE_URL", "OPENAI_BASE_URL"))


def prompts_dir() -> Path:
    return package_data("prompts")


def load_prompt(name: str) -> str:
    return (prompts_dir() / f"{name}.md").read_text(encoding="utf-8")


def fill(template: str, **values: str) -> str:
    """Literal substitution of {task}, {kernel}, {feedback} in one pass (never str.format: the
    kernel and the feedback contain braces, and a value is never searched for placeholders)."""
    return re.sub(r"\{(task|kernel|feedback)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def extract_kernel(answer: str) -> str:
    """The first fenced block of the answer, else the answer itself (then it will not parse)."""
    answer = answer[:MAX_ANSWER_CHARS]
    m = _FENCE.search(answer)
    return (m.group(1) if m else answer).strip("\n") + "\n"


def _price(variable: str) -> float:
    """USD per million tokens from the environment; unset or not a finite number >= 0: 0."""
    import math

    try:
        value = float(os.environ.get(variable, "0") or 0)
    except ValueError:
        return 0.0
    return value if math.isfinite(value) and value >= 0 else 0.0


class LLMAgent:
    name = "llm"

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 price_in: float | None = None, price_out: float | None = None, max_turns: int = 50,
                 history: int = 4, seed: int = 0, timeout: float = 120.0):
        env_url, env_key, env_model = endpoint()
        self.model, self.base_url, self.api_key = model or env_model, base_url or env_url, api_key or env_key
        self.price_in = price_in if price_in is not None else _price("AVE_LLM_PRICE_IN")
        self.price_out = price_out if price_out is not None else _price("AVE_LLM_PRICE_OUT")
        self.max_turns, self.history, self.seed, self.timeout = max_turns, history, seed, timeout
        self.error: str | None = None  # why the agent stopped early (endpoint failure)

    def start(self, text: str, task: Task, mode: str, feedback: Feedback) -> None:
        from openai import OpenAI

        self.client = OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0)
        self.mode, self.turns = mode, 0
        self.system = load_prompt("system")
        self.first = fill(load_prompt(mode), task=task.description, kernel=text,
                          feedback=json.dumps(feedback.data, indent=1, sort_keys=True))
        self.exchanges: list[tuple[str, str]] = []  # (the agent's answer, the feedback on it)
        self.pending: str | None = None

    def _messages(self) -> list[dict]:
        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": self.first}]
        for answer, fb in self.exchanges[-self.history:]:
            msgs += [{"role": "assistant", "content": answer}, {"role": "user", "content": fb}]
        return msgs

    def propose(self, feedback: Feedback | None) -> Proposal | None:
        if self.pending is not None and feedback is not None:
            self.exchanges.append((self.pending, fill(load_prompt("followup"), task="", kernel="",
                                                      feedback=json.dumps(feedback.data, indent=1, sort_keys=True))))
        if self.turns >= self.max_turns:
            return None
        self.turns += 1
        try:
            answer = self.client.chat.completions.create(model=self.model, messages=self._messages(),
                                                         temperature=0, seed=self.seed)
            content = answer.choices[0].message.content or ""
        except Exception as exc:  # noqa: BLE001 - any endpoint failure ends this repair, recorded
            self.error = f"{type(exc).__name__}: {str(exc)[:200]}"
            return None
        self.pending = content[:MAX_ANSWER_CHARS]
        u = getattr(answer, "usage", None)
        p_in = int(getattr(u, "prompt_tokens", 0) or 0)
        p_out = int(getattr(u, "completion_tokens", 0) or 0)
        usage = {"prompt_tokens": p_in, "completion_tokens": p_out, "requests": 1,
                 "cost_usd": (p_in * self.price_in + p_out * self.price_out) / 1e6}
        return Proposal(extract_kernel(self.pending), None, note=self.pending[:2000], usage=usage)
