"""The ``llm-gym serve`` command itself: ready line with the real port, a whole episode through openenv-core's client,
a clean stop on SIGINT and SIGTERM (every env closed, exit 0), and one-line refusals of unknown ids and settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (make install-trainers)")
from openenv import GenericEnvClient  # noqa: E402

pytestmark = pytest.mark.serve

LLM_GYM = str(Path(sys.executable).parent / "llm-gym")
READY = "llm-gym serve: OpenSpiel-kuhn_poker-v0 on http://127.0.0.1:"


def start(*args: str) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if k != "LLM_GYM_DEBUG"}
    proc = subprocess.Popen(
        [LLM_GYM, "serve", "--env", "OpenSpiel-kuhn_poker-v0", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    assert line.startswith(READY), (line, proc.stderr.read() if proc.poll() is not None else "")
    port = line[len(READY) :].split()[0]
    return proc, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_plays_and_stops_cleanly(stop: signal.Signals) -> None:
    proc, url = start("--max-sessions", "4")
    try:
        with GenericEnvClient(base_url=url).sync() as client:
            result = client.reset(seed=7)
            while not result.done:
                result = client.step({"text": result.observation["action_names"][0]})
        open_client = GenericEnvClient(base_url=url).sync()
        open_client.reset(seed=8)  # still open when the server stops
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "llm-gym serve: stopped; 2 sessions served, 2 closed"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "LLMBrekout-v0"], "error: unknown env 'LLMBrekout-v0'; did you mean 'LLMBreakout-v0'"),
        (
            ["--env", "OpenSpiel-tic_tac_toe-v0", "--env-arg", "opponnt=mcts"],
            "error: OpenSpiel-tic_tac_toe-v0 takes no argument 'opponnt'; did you mean 'opponent'?",
        ),
        (["--env", "Trace-v0", "--max-sesions", "3"], "error: No such option: --max-sesions"),
        (["--env", "Trace-v0", "--log-level", "loud"], "error: --log-level 'loud': use critical, error, warning"),
    ],
)
def test_bad_settings_are_one_line(args: list[str], message: str) -> None:
    done = subprocess.run([LLM_GYM, "serve", *args], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(message)


def test_a_taken_port_is_one_line() -> None:
    proc, url = start()
    try:
        port = url.rsplit(":", 1)[1]
        done = subprocess.run(
            [LLM_GYM, "serve", "--env", "Trace-v0", "--port", port], capture_output=True, text=True, timeout=120
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"error: cannot listen on 127.0.0.1:{port}")
