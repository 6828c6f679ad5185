"""What every command shares: one-line errors with exit code 2 (from llm_gym.commands), config resolution, JSON
output. The shared option aliases are in :mod:`llm_gym.cli.options`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

# The error policy and the consoles live below the CLI (plugins' commands use them too); re-exported here.
from llm_gym.commands import EXIT_USER_ERROR as EXIT_USER_ERROR
from llm_gym.commands import cli_errors as cli_errors
from llm_gym.commands import console as console
from llm_gym.commands import err_console as err_console
from llm_gym.config import apply_overrides, load_config_file, parse_assignments
from llm_gym.errors import ConfigError


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
