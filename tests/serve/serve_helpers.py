"""Helpers of the serve tests: a real ``llm-gym serve`` app (openenv-core's server under uvicorn) on a loopback port in
a thread of the test, and the in-process replay every served trajectory must equal."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (make install-trainers)")

from llm_gym.actions import TextActions  # noqa: E402
from llm_gym.envs.catalog import make  # noqa: E402
from llm_gym.serve.app import ServerLimits, bind, create_app, make_uvicorn  # noqa: E402
from llm_gym.serve.environment import ServeSpec  # noqa: E402


@contextmanager
def running_server(spec: ServeSpec, limits: ServerLimits | None = None) -> Iterator[tuple[str, Any]]:
    """``(base_url, app)`` of a server playing ``spec``, stopped (and checked to have closed every env) on exit."""
    limits = limits or ServerLimits()
    app = create_app(spec, limits)
    server = make_uvicorn(app, limits)
    sock = bind("127.0.0.1", 0)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive()
        assert app.state.server.active_sessions == 0


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def in_process_replay(
    env_id: str, env_kwargs: dict[str, Any], seed: int, task_id: int | None, answers: list[str]
) -> list[tuple[str, float, bool]]:
    """The same answers played in-process the way llm-gym's own LM agents step an env (TextActions over
    ``llm_gym.make``; a text-action env takes the answer itself): (observation text, reward, done) per step, the
    reset's first."""
    from llm_gym.envs.protocol import takes_text
    from llm_gym.lm.prompts import observation_text

    base = make(env_id, **env_kwargs)
    env = base if takes_text(base) else TextActions(base)
    observation, _ = env.reset(seed=seed, options=None if task_id is None else {"task_id": task_id})
    out = [(observation_text(observation), 0.0, False)]
    for answer in answers:
        observation, reward, terminated, truncated, _ = env.step(answer)
        out.append((observation_text(observation), float(reward), bool(terminated or truncated)))
    env.close()
    return out
