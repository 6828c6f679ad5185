"""Presets: named, ready-to-copy training recipes shipped with an agent (``llm-gym train --preset NAME``).

A preset is a TOML file in the folder ``presets/`` beside the module that defines the agent class (the folder an
agent names in :attr:`llm_gym.agent.Agent.presets_folder`), one file per preset, named ``NAME.toml``::

    description = "Kuhn poker from 64 best-response games, 3 epochs: about 2 minutes on 2 cores"
    env = "OpenSpiel-kuhn_poker-v0"        # the env it was made for (train uses it when --env is not given)

    [env_args]                              # optional: gym.make arguments (--env-arg wins over them)

    [before]                                # optional: a file the preset trains on and the command that makes it
    creates = "demos/kuhn_poker_best_response.jsonl"
    command = "llm-gym demos --agent best_response --env OpenSpiel-kuhn_poker-v0 --episodes 64 --out ..."

    [config]                                # config fields, as --config takes them
    demos = "demos/kuhn_poker_best_response.jsonl"
    epochs = 3

So a third-party plugin ships presets the same way: a ``presets/`` folder of TOML files as package data beside its
agent's module (or an ``Agent.presets()`` of its own). ``llm-gym agents NAME`` lists them; a preset file is also a
valid ``--config`` file (its ``config`` table is read). On the command line a preset is the base that ``--config``,
``--set``, ``--model`` and ``--seed`` change: defaults <- preset <- --config <- --set <- --model/--backend/--seed.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from llm_gym.config import apply_overrides
from llm_gym.errors import ConfigError, UnknownNameError


class PresetOwner(Protocol):
    """An agent class as the preset functions read it (:class:`llm_gym.agent.Agent` is one; the agent contract
    imports this module, not the other way round)."""

    name: ClassVar[str]
    Config: ClassVar[type]
    presets_folder: ClassVar[str]

    @classmethod
    def presets(cls) -> dict[str, Preset]: ...


PRESET_KEYS = ("description", "env", "env_args", "before", "config")
"""The top-level keys a preset file may hold."""


@dataclass(frozen=True)
class Preset:
    """One named recipe of an agent."""

    name: str
    description: str
    config: Mapping[str, Any] = field(default_factory=dict)
    """Config fields (what ``--config`` takes), over the agent's defaults."""
    env: str | None = None
    """The env the preset was made for; ``train`` uses it when ``--env`` is not given."""
    env_args: Mapping[str, Any] = field(default_factory=dict)
    """``gym.make`` arguments; the user's ``--env-arg`` values win over them."""
    creates: str | None = None
    """A file the preset trains on that a command must make first (``before.creates``)."""
    command: str | None = None
    """The command that makes ``creates`` (``before.command``)."""
    source: Path | None = None
    """The file it was read from."""

    def apply(self, agent_cls: type[PresetOwner], base: Any = None) -> Any:
        """The agent's config (``base``, or its defaults) with this preset's fields applied."""
        config = base if base is not None else agent_cls.Config()
        return apply_overrides(config, self.config, source=f"preset {agent_cls.name}:{self.name}")

    def check_ready(self, agent: str) -> None:
        """Refuse, in one line naming the command that makes it, a preset whose input file is not there yet."""
        if self.creates is not None and not Path(self.creates).exists():
            raise ConfigError(
                f"preset {agent}:{self.name} trains on {self.creates}, which does not exist yet; make it first: "
                f"{self.command or '(the preset names no command)'}"
            )


def read_preset(path: Path) -> Preset:
    """A preset from its TOML file; a malformed one raises one :class:`ConfigError` naming the file."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"preset file {path} cannot be read: {exc}") from exc
    unknown = sorted(set(data) - set(PRESET_KEYS))
    if unknown:
        raise ConfigError(f"preset file {path}: unknown key(s) {', '.join(unknown)}; a preset holds {PRESET_KEYS}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f'preset file {path} needs a description = "..." line')
    tables = {key: data.get(key, {}) for key in ("config", "env_args", "before")}
    for key, value in tables.items():
        if not isinstance(value, dict):
            raise ConfigError(f"preset file {path}: {key} must be a table ([{key}])")
    env = data.get("env")
    if env is not None and not isinstance(env, str):
        raise ConfigError(f"preset file {path}: env must be an env id in quotes")
    before = tables["before"]
    if before and not (isinstance(before.get("creates"), str) and isinstance(before.get("command"), str)):
        raise ConfigError(f'preset file {path}: [before] needs creates = "file" and command = "..."')
    return Preset(
        name=path.stem,
        description=" ".join(description.split()),
        config=tables["config"],
        env=env,
        env_args=tables["env_args"],
        creates=before.get("creates"),
        command=before.get("command"),
        source=path,
    )


def presets_folder(agent_cls: type[PresetOwner]) -> Path | None:
    """The folder an agent's preset files lie in (``presets_folder`` beside the module that defines the class), or
    None when the module has no file (defined in a notebook, say)."""
    module = sys.modules.get(agent_cls.__module__)
    module_file = getattr(module, "__file__", None)
    if module_file is None:
        return None
    return Path(module_file).parent / agent_cls.presets_folder


def agent_presets(agent_cls: type[PresetOwner]) -> dict[str, Preset]:
    """``{name: preset}`` of an agent: :meth:`Agent.presets` (by default the TOML files of its presets folder)."""
    return dict(sorted(agent_cls.presets().items()))


def folder_presets(agent_cls: type[PresetOwner]) -> dict[str, Preset]:
    """The presets read from the agent's presets folder (what :meth:`Agent.presets` gives by default)."""
    folder = presets_folder(agent_cls)
    if folder is None or not folder.is_dir():
        return {}
    return {path.stem: read_preset(path) for path in sorted(folder.glob("*.toml"))}


def get_preset(agent_cls: type[PresetOwner], name: str) -> Preset:
    """The agent's preset ``name``; an unknown name raises with the close matches and the ones that exist."""
    presets = agent_presets(agent_cls)
    if name not in presets:
        hint = "" if presets else f"({agent_cls.name} ships no presets)"
        raise UnknownNameError(f"preset of {agent_cls.name}", name, presets, hint=hint)
    return presets[name]
