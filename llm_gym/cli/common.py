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


@dataclasses.dataclass(frozen=True)
class ConfigSources:
    """What a command line says about an agent's config; :func:`resolve_config` (a fresh agent) and
    ``checkpoint_overrides`` (a checkpoint) apply it in the same order, so one value reaches both ways of playing."""

    config_file: Path | None = None
    """``--config``: a TOML (or JSON) file of config fields."""
    sets: list[str] | None = None
    """``--set key=value`` assignments, applied over the file."""
    model: str | None = None
    backend: str | None = None
    seed: int | None = None
    """``--model``, ``--backend``, ``--seed``: applied last; a config without a model or backend refuses those."""


def resolve_config(config_cls: type, sources: ConfigSources, *, base: Any = None) -> Any:
    """Defaults (or ``base``) <- config file <- ``--set`` <- ``--model`` / ``--backend`` / ``--seed``."""
    config = base if base is not None else config_cls()
    if sources.config_file is not None:
        config = apply_overrides(config, load_config_file(sources.config_file), source=str(sources.config_file))
    if sources.sets:
        config = apply_overrides(config, parse_assignments(sources.sets), source="--set")
    names = {f.name for f in dataclasses.fields(config_cls)}
    if sources.model is not None:
        if "model" not in names:
            raise ConfigError(f"{config_cls.__name__} has no model to choose; drop --model")
        config = apply_overrides(config, {"model": sources.model}, source="--model")
    if sources.backend is not None:
        if "backend" not in names:
            raise ConfigError(f"{config_cls.__name__} has no backend to choose; drop --backend")
        config = apply_overrides(config, {"backend": sources.backend}, source="--backend")
    if sources.seed is not None:
        config = apply_overrides(config, {"seed": sources.seed}, source="--seed")
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
