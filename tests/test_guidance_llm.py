"""The LLM repair agent (issue 15), through the real `openai` client, against a local HTTP server
that this test starts on the loopback interface (127.0.0.1, a free port) and that replays
recorded chat-completion responses from tests/data/guidance/llm_replay.json (written in the
OpenAI response format for this test: a candidate that deletes the assertion, then the fix).
Nothing here calls a network endpoint. The agent's first candidate must be rejected by the
frozen-spec guard, the second accepted (VERIFIED, matching the reference at two sizes); tokens
and cost are summed from the responses' `usage`; the requests carry the mode's prompt."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("ave_planner", reason="ave-planner is not installed (make install installs planner/)")
pytest.importorskip("openai", reason="the planner's `llm` extra (openai) is not installed: make install installs it")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import guidance  # noqa: E402

from ave_planner.evaluate import CallCache, Evaluator  # noqa: E402
from ave_planner.llm_agent import LLMAgent, extract_kernel, fill  # noqa: E402
from ave_planner.repair import repair  # noqa: E402

REPLAY = json.loads((ROOT / "tests" / "data" / "guidance" / "llm_replay.json").read_text())


class _Replay(BaseHTTPRequestHandler):
    responses: list[dict] = []
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - the http.server hook
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body})
        data = json.dumps(type(self).responses.pop(0)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def endpoint():
    _Replay.responses = list(REPLAY["responses"])
    _Replay.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_llm_agent_repairs_a_bug_through_the_loopback_replay(endpoint):
    bugs, _ = guidance.corpus(True, None, 0, cache=False)
    bug = next(b for b in bugs if b.id == REPLAY["bug"])
    agent = LLMAgent(model="replay-model", base_url=endpoint, api_key="test", price_in=2.0, price_out=8.0)
    ev = Evaluator(bug.sizes_a, bug.sizes_b, 10, guidance.simulate, CallCache())
    res = repair(bug.text, agent, "invariant", ev)
    assert res.rejected == 1 and res.fixed and res.candidates == 1, res.steps
    assert res.usage["prompt_tokens"] == 1480 + 2250 and res.usage["completion_tokens"] == 610 + 640
    assert res.usage["requests"] == 2
    assert res.usage["cost_usd"] == pytest.approx(((1480 + 2250) * 2.0 + (610 + 640) * 8.0) / 1e6)
    first, second = (r["body"] for r in _Replay.requests)
    assert all(r["path"] == "/v1/chat/completions" for r in _Replay.requests)
    assert first["model"] == "replay-model" and first["messages"][0]["role"] == "system"
    assert "ave/tag-assert" in first["messages"][1]["content"]  # the invariant mode's feedback
    assert "frozen spec" in second["messages"][-1]["content"]  # told why the first was rejected


def test_an_answer_is_data():
    assert extract_kernel("x\n```ave\n@kernel()\n```\ntail") == "@kernel()\n"
    assert extract_kernel("no block at all") == "no block at all\n"
    assert fill("{kernel} {feedback}", kernel="{feedback}", feedback="{}") == "{feedback} {}"
