"""``llm-gym serve``: an env id over OpenEnv's protocol, for trainers that reach envs through OpenEnv clients."""

from __future__ import annotations

import typer

from llm_gym.cli.common import cli_errors, parse_env_args
from llm_gym.cli.options import EnvArgOption
from llm_gym.errors import ConfigError, MissingDependencyError
from llm_gym.integrations.episode import TextEpisode


@cli_errors
def serve(
    env: str = typer.Option(..., "--env", "-e", help="Env id every session plays (see `llm-gym envs`)."),
    env_args: EnvArgOption = None,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (127.0.0.1: this machine only)."),
    port: int = typer.Option(8000, "--port", "-p", min=0, max=65535, help="Port; 0 picks a free one."),
    max_sessions: int = typer.Option(64, "--max-sessions", min=1, help="Sessions (one env each) open at once."),
    session_timeout: float = typer.Option(
        0.0, "--session-timeout", min=0.0, help="Close a session idle this many seconds (0: never)."
    ),
    max_message_bytes: int = typer.Option(
        1 << 20, "--max-message-bytes", min=1024, help="Largest WebSocket message or HTTP body accepted."
    ),
    max_action_chars: int = typer.Option(65536, "--max-action-chars", min=1, help="Longest answer a step takes."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn's log level (info logs each connection)."),
) -> None:
    """Serve ENV over OpenEnv's protocol: one env per session, reset with seed and task_id, answers parsed as
    llm-gym's LM agents' are. Connect with openenv-core's EnvClient at ws://HOST:PORT/ws; Ctrl-C stops."""
    try:
        from llm_gym.serve import app as server  # the serve extra (openenv-core, FastAPI, uvicorn)
    except ImportError as exc:
        raise MissingDependencyError("llm-gym serve", "serve") from exc

    if log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
        raise ConfigError(f"--log-level {log_level!r}: use critical, error, warning, info, debug or trace")
    kwargs = parse_env_args(env_args)
    TextEpisode(env, kwargs).close()  # an unknown id or argument fails here, once, with close matches
    spec = server.ServeSpec(env, kwargs, max_action_chars=max_action_chars)
    limits = server.ServerLimits(max_sessions, session_timeout or None, max_message_bytes)
    try:
        server.serve(spec, limits, host, port, log_level)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port") from exc


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
