"""Bad input to ``llm-gym serve``: each mistake gets one clear error, and the server goes on serving everyone else.

Malformed messages, unknown message types, reset arguments and action fields, illegal action ids, actions after the
episode ended, oversized answers and frames and HTTP bodies, abrupt disconnects and a session past the bound.
"""

from __future__ import annotations

import json
import socket

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (make install-trainers)")
import httpx  # noqa: E402
from openenv import GenericEnvClient  # noqa: E402
from serve_helpers import wait_until  # noqa: E402  (tests/serve/serve_helpers.py)
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from llm_gym.serve.app import ServerLimits  # noqa: E402
from llm_gym.serve.environment import ServeSpec  # noqa: E402

pytestmark = pytest.mark.serve

SPEC = ServeSpec("OpenSpiel-tic_tac_toe-v0", max_action_chars=1000)


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/ws"


def ask(ws, message: object) -> dict:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def error(answer: dict) -> str:
    assert answer["type"] == "error", answer
    return answer["data"]["message"]


def test_each_mistake_is_one_clear_error_and_the_session_goes_on(serve_env) -> None:
    with serve_env(SPEC) as (url, _), connect(ws_url(url)) as ws:
        assert "Invalid JSON" in error(ask(ws, "{not json"))
        assert "Unknown message type: jump" in error(ask(ws, {"type": "jump"}))
        assert error(ask(ws, {"type": "step", "data": {"text": "x(1,1)"}})) == "no episode yet: reset first"
        message = error(ask(ws, {"type": "reset", "data": {"sed": 3}}))
        assert message == "unknown reset argument 'sed'; did you mean 'seed'? (known: seed, task_id, episode_id)"
        assert (
            error(ask(ws, {"type": "reset", "data": {"seed": "three"}})) == "seed='three' must be a whole number >= 0"
        )
        first = ask(ws, {"type": "reset", "data": {"seed": 3}})["data"]["observation"]
        message = error(ask(ws, {"type": "step", "data": {"txt": "x(1,1)"}}))
        assert message.startswith("unknown action field 'txt' (did you mean 'text'?)")
        assert "exactly one" in error(ask(ws, {"type": "step", "data": {"text": "x(1,1)", "action_id": 4}}))
        message = error(ask(ws, {"type": "step", "data": {"action_id": 99}}))
        assert message.startswith("action id 99 is not legal now; legal: 0=x(0,0), 1=x(0,1)")
        assert "at most 1,000" in error(ask(ws, {"type": "step", "data": {"text": "x" * 5000}}))
        # Nothing above moved the game: the board is still the one reset showed.
        state = ask(ws, {"type": "state"})["data"]
        assert state["step_count"] == 0 and state["seed"] == 3
        result = ask(ws, {"type": "step", "data": {"text": first["action_names"][4]}})["data"]
        assert result["observation"]["step"] == 1
        while not result["done"]:
            result = ask(ws, {"type": "step", "data": {"action_id": result["observation"]["legal_actions"][0]}})["data"]
        message = error(ask(ws, {"type": "step", "data": {"text": "x(0,0)"}}))
        assert "ended after" in message and "reset to start a new one" in message
        assert ask(ws, {"type": "reset", "data": {"seed": 4}})["type"] == "observation"


def test_an_oversized_frame_closes_that_connection_only(serve_env) -> None:
    limits = ServerLimits(max_sessions=4, max_message_bytes=64 * 1024)
    with serve_env(SPEC, limits) as (url, app), GenericEnvClient(base_url=url).sync() as other:
        other.reset(seed=1)
        with connect(ws_url(url), max_size=None) as ws:
            assert ask(ws, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"
            ws.send(json.dumps({"type": "step", "data": {"text": "x" * 200_000}}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # "message too big"
        assert wait_until(lambda: app.state.server.active_sessions == 1)
        assert other.step({"action_id": 4}).observation["step"] == 1
        # HTTP: a body over the cap is refused before it is read.
        response = httpx.post(f"{url}/step", content=b"{" + b" " * 100_000 + b"}", timeout=30)
        assert response.status_code == 413
        assert "at most 65,536" in response.json()["detail"]


def test_abrupt_disconnects_free_their_envs(serve_env) -> None:
    limits = ServerLimits(max_sessions=3)
    with serve_env(SPEC, limits) as (url, app), GenericEnvClient(base_url=url).sync() as survivor:
        survivor.reset(seed=0)
        port = int(url.rsplit(":", 1)[1])
        for _ in range(5):  # more than the bound: each dropped session must have been freed
            with connect(ws_url(url)) as ws:
                assert ask(ws, {"type": "reset", "data": {"seed": 5}})["type"] == "observation"
                ws.send(json.dumps({"type": "step", "data": {"action_id": 4}}))
                ws.socket.shutdown(socket.SHUT_RDWR)  # gone mid-step, no close frame
            # and a client that dies half-way through the WebSocket handshake
            raw = socket.create_connection(("127.0.0.1", port))
            raw.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
            raw.close()
            assert wait_until(lambda: app.state.server.active_sessions == 1)
        assert survivor.step({"action_id": 4}).observation["step"] == 1
        assert app.state.server.sessions_closed >= 5


def test_a_session_past_the_bound_is_refused_clearly(serve_env) -> None:
    with serve_env(SPEC, ServerLimits(max_sessions=2)) as (url, app):
        first, second = (GenericEnvClient(base_url=url).sync() for _ in range(2))
        with first, second:
            first.reset(seed=0)
            second.reset(seed=1)
            with GenericEnvClient(base_url=url).sync() as third, pytest.raises(RuntimeError) as refused:
                third.reset(seed=2)
            message = str(refused.value)
            assert "at most 2 sessions at once and all are open" in message and "CAPACITY_REACHED" in message
            assert first.step({"action_id": 0}).observation["step"] == 1
        assert wait_until(lambda: app.state.server.active_sessions == 0)
        with GenericEnvClient(base_url=url).sync() as again:
            assert again.reset(seed=2).observation["seed"] == 2
