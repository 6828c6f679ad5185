"""What every command shares: one-line errors with exit code 2, option aliases, config resolution."""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from llm_gym.atomic import error_for
from llm_gym.config import apply_overrides, load_config_file, parse_assignments
from llm_gym.errors import ConfigError, LLMGymError

F = TypeVar("F", bound=Callable[..., Any])
console = Console()
err_console = Console(stderr=True)

EXIT_USER_ERROR = 2


def cli_errors(command: F) -> F:
    """Turn an :class:`LLMGymError` into one line on stderr and exit code 2 (``LLM_GYM_DEBUG=1``: the traceback)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except LLMGymError as exc:
            if os.environ.get("LLM_GYM_DEBUG") == "1":
                raise
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None
        except OSError as exc:
            # A write no llm_gym.atomic helper wraps (a library's own file): a full disk or a read-only place is
            # still one line naming the file, never a traceback.
            if os.environ.get("LLM_GYM_DEBUG") == "1" or exc.errno not in _DISK_ERRNOS:
                raise
            print(f"error: {error_for(exc.filename or 'a file', exc)}", file=sys.stderr)
            raise typer.Exit(EXIT_USER_ERROR) from None

    return wrapper  # type: ignore[return-value]


_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


AgentOption = Annotated[str | None, typer.Option("--agent", "-a", help="Agent name (see `llm-gym agents`).")]
EnvOption = Annotated[str | None, typer.Option("--env", "-e", help="Env id (see `llm-gym envs`).")]
SeedOption = Annotated[
    int | None, typer.Option("--seed", "-s", min=0, help="Seed, >= 0 (overrides the config's seed).")
]
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model for LM agents: smollm2-135m, an HF id or a local dir.")
]
BackendOption = Annotated[
    str | None, typer.Option("--backend", help="LM backend for LM agents: hf, openai, vllm (see `llm-gym plugins`).")
]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override one config field: key=value (repeatable).")
]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML (or JSON) file of config fields.")]
EnvArgOption = Annotated[
    list[str] | None,
    typer.Option("--env-arg", help="Keyword argument for gym.make: key=value, value as JSON or text (repeatable)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]


def resolve_config(
    config_cls: type,
    *,
    config_file: Path | None = None,
    sets: list[str] | None = None,
    model: str | None = None,
    seed: int | None = None,
    base: Any = None,
    backend: str | None = None,
) -> Any:
    """Defaults (or ``base``) <- config file <- ``--set`` <- ``--model`` / ``--backend`` / ``--seed``."""
    config = base if base is not None else config_cls()
    if config_file is not None:
        config = apply_overrides(config, load_config_file(config_file), source=str(config_file))
    if sets:
        config = apply_overrides(config, parse_assignments(sets), source="--set")
    names = {f.name for f in dataclasses.fields(config_cls)}
    if model is not None:
        if "model" not in names:
            raise ConfigError(f"{config_cls.__name__} has no model to choose; drop --model")
        config = apply_overrides(config, {"model": model}, source="--model")
    if backend is not None:
        if "backend" not in names:
            raise ConfigError(f"{config_cls.__name__} has no backend to choose; drop --backend")
        config = apply_overrides(config, {"backend": backend}, source="--backend")
    if seed is not None:
        config = apply_overrides(config, {"seed": seed}, source="--seed")
    return config


def parse_env_args(items: list[str] | None) -> dict[str, Any]:
    """``--env-arg`` values: JSON where it parses (numbers, booleans, lists), text otherwise."""
    out: dict[str, Any] = {}
    for key, raw in parse_assignments(items or [], what="--env-arg").items():
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def print_json(data: Any) -> None:
    """JSON on stdout, unstyled (machines read it)."""
    print(json.dumps(data, indent=2, default=str))
