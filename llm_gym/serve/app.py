"""The server behind ``llm-gym serve``: openenv-core's ``HTTPEnvServer`` on a FastAPI app, run by uvicorn.

openenv-core provides the protocol: ``/ws`` (one WebSocket per session, each with its own env, made in its own
thread), the stateless HTTP ``/reset`` and ``/step``, ``/schema``, ``/metadata``, ``/health``, the session bound
and an idle-session reaper. llm-gym adds what a shared server needs around it:
* a refusal past the session bound that says what to do, as the reply to the client's first message;
* a cap on a message's size (WebSocket frames: uvicorn's ``ws_max_size``, which closes that connection with code
  1009; HTTP bodies: 413 before the body is read) so one client cannot take the server's memory;
* a clean stop: on SIGINT/SIGTERM the open sessions' connections are closed, every env is closed, and the count
  of sessions served is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig, WSErrorCode, WSErrorResponse

from llm_gym import __version__
from llm_gym.serve.environment import LLMGymAction, LLMGymEnvironment, LLMGymObservation, ServeSpec


@dataclass(frozen=True)
class ServerLimits:
    """How much one server holds."""

    max_sessions: int = 64
    """Sessions (each with its own env) open at once; the next is refused until one closes."""
    session_timeout: float | None = None
    """Seconds a session may stay idle before its env is closed (None: no limit)."""
    max_message_bytes: int = 1 << 20
    """The largest WebSocket message or HTTP body accepted."""


class LLMGymServer(HTTPEnvServer):
    """openenv-core's server with llm-gym's refusal wording and a count of sessions served and closed."""

    def __init__(self, spec: ServeSpec, limits: ServerLimits) -> None:
        config = ConcurrencyConfig(max_concurrent_envs=limits.max_sessions, session_timeout=limits.session_timeout)
        super().__init__(
            functools.partial(LLMGymEnvironment, spec), LLMGymAction, LLMGymObservation, concurrency_config=config
        )
        self.spec, self.limits = spec, limits
        self.sessions_opened = 0
        self.sessions_closed = 0

    async def _create_session(self) -> tuple[str, Any]:
        try:
            created = await super()._create_session()
        except SessionCapacityError as exc:
            raise SessionCapacityError(
                exc.active_sessions, exc.max_sessions, capacity_message(exc.max_sessions)
            ) from exc
        self.sessions_opened += 1
        return created

    async def _destroy_session(self, session_id: str) -> None:
        await super()._destroy_session(session_id)
        self.sessions_closed += 1

    async def close_all(self) -> None:
        """Close every session still open (a stop that did not wait for its clients)."""
        for session_id in list(self._session_info):
            await self._destroy_session(session_id)


def create_app(spec: ServeSpec, limits: ServerLimits | None = None) -> FastAPI:
    """The FastAPI app serving ``spec`` (``app.state.server`` is the :class:`LLMGymServer`)."""
    limits = limits or ServerLimits()
    app = FastAPI(
        title=f"llm-gym serve: {spec.env_id}",
        version=__version__,
        description="An llm-gym env over OpenEnv's protocol: connect to /ws with openenv-core's EnvClient.",
    )
    server = LLMGymServer(spec, limits)
    server.register_routes(app)
    app.state.server = server
    app.router.on_shutdown.append(server.close_all)
    app.add_middleware(Guard, server=server, max_bytes=limits.max_message_bytes)
    return app


class Guard:
    """What stands before openenv-core's routes.

    * An HTTP body larger than ``max_bytes`` gets 413 and one line, before it is read.
    * A WebSocket past the session bound is accepted, its first message answered with openenv's error reply
      (``CAPACITY_REACHED``, saying what to do) and then closed (1013, try again later): openenv-core's own refusal
      closes before the client's first message, so its client would only see a closed connection.
    * A WebSocket that the client closed first ends quietly: openenv-core's handler closes it once more on its way
      out, which Starlette answers with ``WebSocketDisconnect``; the session is freed by then.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], server: LLMGymServer, max_bytes: int) -> None:
        self.app, self.server, self.max_bytes = app, server, max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.max_bytes:
                detail = (
                    f"the request body has {int(length):,} bytes; this server takes at most {self.max_bytes:,} "
                    "(llm-gym serve --max-message-bytes)"
                )
                body = json.dumps({"detail": detail}).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 413, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        if scope["type"] == "websocket" and scope.get("path") == "/ws":
            if self.server.active_sessions >= self.server.max_concurrent_envs:
                await self._refuse(WebSocket(scope, receive, send))
                return
            with contextlib.suppress(WebSocketDisconnect):
                await self.app(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _refuse(self, websocket: WebSocket) -> None:
        limit = self.server.max_concurrent_envs
        reply = WSErrorResponse(
            data={
                "message": capacity_message(limit),
                "code": WSErrorCode.CAPACITY_REACHED,
                "active_sessions": self.server.active_sessions,
                "max_sessions": limit,
            }
        )
        with contextlib.suppress(WebSocketDisconnect, TimeoutError, RuntimeError):
            await websocket.accept()
            await asyncio.wait_for(websocket.receive_text(), timeout=30)
            await websocket.send_text(reply.model_dump_json())
            await websocket.close(code=1013, reason=f"server full ({limit} sessions)")


def capacity_message(limit: int) -> str:
    return (
        f"this server plays at most {limit} sessions at once and all are open: close one (or wait for one to end) "
        "and connect again, or start the server with a larger --max-sessions"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), so the real port is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def make_uvicorn(app: FastAPI, limits: ServerLimits, log_level: str = "warning") -> Any:
    """A uvicorn server for ``app`` with the message cap; it stops on SIGINT/SIGTERM within a few seconds."""

    class Server(uvicorn.Server):
        # uvicorn raises the stopping signal again once it has shut down (so a SIGINT ends in KeyboardInterrupt);
        # a stop asked for is this command's normal end, so the signal is only handled.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(
        app,
        log_level=log_level,
        ws_max_size=limits.max_message_bytes,
        timeout_graceful_shutdown=5,
        lifespan="on",
    )
    return Server(config)


def serve(spec: ServeSpec, limits: ServerLimits, host: str, port: int, log_level: str = "warning") -> int:
    """Serve until stopped; prints one line when ready (with the real port) and one when stopped."""
    sock = bind(host, port)
    app = create_app(spec, limits)
    server = make_uvicorn(app, limits, log_level)
    bound = sock.getsockname()
    url_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(
        f"llm-gym serve: {spec.env_id} on http://{url_host}:{bound[1]} (OpenEnv WebSocket /ws; at most "
        f"{limits.max_sessions} sessions)",
        flush=True,
    )
    asyncio.run(server.serve(sockets=[sock]))
    stats: LLMGymServer = app.state.server
    print(
        f"llm-gym serve: stopped; {stats.sessions_opened} sessions served, {stats.sessions_closed} closed",
        file=sys.stderr,
        flush=True,
    )
    return 0
