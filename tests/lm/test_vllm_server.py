"""The ``openai`` backend against vLLM's own OpenAI-compatible server (``vllm serve``), started by the test on
127.0.0.1 with the default model: the same scores as the hf backend within the vllm tests' tolerance and the same
greedy answers; and a server that goes away mid-run is one clear error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

SCORE_TOLERANCE = 2e-3
START_TIMEOUT = 900
"""Seconds the server may take to start: importing vLLM and compiling the model take minutes on a busy CPU."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    from llm_gym.lm.models import resolve_model

    model_dir = str(resolve_model("smollm2-135m"))
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir]
    command += ["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    command += ["--max-model-len", "4096", "--block-size", "32", "--kv-cache-memory-bytes", str(1 << 30)]
    # Eager mode: this test checks answers, not speed, and skips minutes of compiling a second engine.
    command += ["--gpu-memory-utilization", "0.25", "--enforce-eager"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"vllm serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not answer within {START_TIMEOUT} s:\n{log.read_text()[-3000:]}")
                time.sleep(2)
        yield base_url, model_dir, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the server and the engine processes it started
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def hf():
    backend = make_backend("hf", "smollm2-135m", dtype="float32", threads=1)
    yield backend
    backend.close()


def test_openai_backend_over_vllm_serve_matches_hf(server, hf) -> None:
    base_url, model_dir, _ = server
    backend = make_backend("openai", "smollm2", base_url=base_url, tokenizer=model_dir, concurrency=4, timeout=300)
    requests = [
        ScoreRequest("Pick an action.", "The ball is left of the paddle.", ("NOOP", "FIRE", "RIGHT", "LEFT")),
        ScoreRequest("Answer with a number.", "How many lives are left?", ("1", "10", "3")),
    ]
    for remote, local in zip(backend.score(requests), hf.score(requests), strict=True):
        np.testing.assert_allclose(remote, local, atol=SCORE_TOLERANCE, rtol=0)
    questions = [GenerateRequest("Answer briefly.", "What is the capital of France?"), GenerateRequest("", "Hi!")]
    remote_answers = backend.generate(questions, max_new_tokens=10, temperature=0.0)
    local_answers = hf.generate(questions, max_new_tokens=10, temperature=0.0)
    assert [c.text for c in remote_answers] == [c.text for c in local_answers]
    assert all(c.logprob < 0 for c in remote_answers)


def test_a_server_that_went_away_is_one_clear_error(server) -> None:
    from llm_gym.lm.backends.openai_compat import ServerError

    base_url, _, process = server
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=60)
    backend = make_backend("openai", "smollm2", base_url=base_url, timeout=5)
    with pytest.raises(ServerError, match="cannot reach .* start the server") as error:
        backend.generate([GenerateRequest("Answer briefly.", "Hi")], max_new_tokens=2, temperature=0.0)
    assert "\n" not in str(error.value)
