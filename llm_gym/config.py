"""Agent configs are frozen dataclasses with a docstring under each field; this module reads and overrides them.

The docstrings are the only help text: :func:`field_docs` reads them from the source, the CLI shows them, and
``--set key=value`` / ``--config file.toml`` go through :func:`apply_overrides`, which names the valid keys when a
key is wrong and the expected type when a value is.

What a field affects is declared next to it: :func:`training_only` for a field only ``train`` reads (a learning
rate, an epoch count: a checkpoint plays the same whatever it says, so ``play --checkpoint --set`` refuses it) and
:func:`speed_only` for one that changes how fast a policy plays and never what it plays (torch threads, an inference
batch size: a bench entry's identity leaves it out, so changing it replays nothing). A field without a marker
affects play. :func:`field_effect` reads the markers.

A dict field may hold another agent's settings (the curriculum's ``base_config``, for the learner it wraps): it is
declared with :func:`nested_agent_config`, naming the field that says which agent, and then the per-field checks look
inside it, where that agent's own markers decide (:func:`llm_gym.agent.field_settings`). ``--set`` of such a field
changes the keys it names and keeps the others.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import textwrap
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from llm_gym.config_checks import number_problems
from llm_gym.errors import ConfigError, did_you_mean

C = TypeVar("C")

Effect = Literal["play", "training", "speed"]
"""What a config field affects: how a policy plays (the default), training only, or the speed of play only."""

EFFECT_KEY = "llm_gym.effect"
"""The ``dataclasses.field`` metadata key that holds a field's :data:`Effect`."""

NESTED_AGENT_KEY = "llm_gym.nested_agent"
"""The ``dataclasses.field`` metadata key of a dict field holding another agent's settings: the name of the field
that names that agent."""


def training_only(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A config field that only training reads, e.g. ``learning_rate: float = training_only(3e-4)``.

    A policy plays the same whatever it says, so ``llm-gym play --checkpoint`` / ``demos --agent CHECKPOINT`` and a
    bench checkpoint entry refuse a change to it in one line instead of dropping it."""
    return _marked("training", default, default_factory)


def speed_only(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A config field that the policy reads but that changes only how fast it plays, never what it plays, e.g.
    ``threads: int = speed_only(0)``: torch threads, the most prompts per forward pass. The policy stays the same:
    floating-point sums may round differently, and where it samples, another split into batches may hand a decision
    other random draws (as another number of parallel envs does). A bench entry's identity leaves it out, so changing
    it replays no stored episode."""
    return _marked("speed", default, default_factory)


def _marked(effect: Effect, default: Any, default_factory: Any) -> Any:
    return dataclasses.field(default=default, default_factory=default_factory, metadata={EFFECT_KEY: effect})


def nested_agent_config(agent_field: str) -> Any:
    """A dict field holding the settings of another agent's config, over that agent's defaults, e.g. the
    curriculum's ``base_config: dict[str, Any] = nested_agent_config("base")``, where field ``base`` names the agent.

    The per-field checks see through it: each key is what the named agent's own field marks it (training-only,
    speed-only, held by its checkpoints), and refusals name it as ``base_config.learning_rate``. ``--set`` of the
    field (``base_config='{"threads": 2}'``) changes only the keys it names."""
    return dataclasses.field(default_factory=dict, metadata={NESTED_AGENT_KEY: agent_field})


def nested_agent_fields(cls: type) -> dict[str, str]:
    """``{dict field: the field naming the agent whose settings it holds}`` of config class ``cls``
    (see :func:`nested_agent_config`); a subclass that redeclares such a field keeps the declaration."""
    out = {}
    for f in dataclasses.fields(cls):
        agent_field = _declared_marker(cls, f.name, NESTED_AGENT_KEY)
        if agent_field is not None:
            out[f.name] = agent_field
    return out


def _declared_marker(cls: type, name: str, key: str) -> Any:
    """The ``key`` metadata of field ``name`` as the nearest class in ``cls``'s MRO that marks it declares it (a
    subclass redeclaring the field with another default keeps a base class's marker), or None where none does."""
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__dataclass_fields__", {}).get(name)
        if declared is not None and key in declared.metadata:
            return declared.metadata[key]
    return None


def field_effect(cls: type, name: str) -> Effect:
    """What field ``name`` of config class ``cls`` affects. A subclass that redeclares a field (another default)
    keeps the marker a base class gave it unless it marks the field itself."""
    effect = _declared_marker(cls, name, EFFECT_KEY)
    return "play" if effect is None else effect


def fields_with_effect(cls: type, effect: Effect) -> frozenset[str]:
    """The names of ``cls``'s fields that affect ``effect`` only (or, for "play", those without a marker)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if field_effect(cls, f.name) == effect)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` for a dataclass and its bases, read from the string literal under each field."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, following in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def config_table(config: Any) -> list[tuple[str, str, str, str]]:
    """(name, type, value, doc) for every field of a config instance or class."""
    cls = config if isinstance(config, type) else type(config)
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if isinstance(config, type):
            value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        else:
            value = getattr(config, f.name)
        rows.append((f.name, type_name(hints[f.name]), repr(value), docs.get(f.name, "")))
    return rows


FIRST_FIELDS = (
    "total_steps", "seed", "model", "backend", "action_mode", "advantage", "num_envs", "learning_rate",
    "eval_episodes", "threads",
)  # fmt: skip
"""The fields ``llm-gym agents NAME`` shows first for a config that names no ``first_fields`` of its own."""


def first_fields(cls: type) -> list[str]:
    """The fields of config class ``cls`` a user changes first: its ``first_fields``, else the :data:`FIRST_FIELDS`
    it has; names it does not have are skipped."""
    names = [f.name for f in dataclasses.fields(cls)]
    chosen = getattr(cls, "first_fields", ()) or FIRST_FIELDS
    return [name for name in chosen if name in names]


def parse_assignments(items: Iterable[str], what: str = "--set") -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a malformed item raises with the expected shape."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON config file into a dict (a resolved ``config.json`` of a run and a preset file work too)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a folder; pass a .toml (or .json) file")
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text()) if path.suffix == ".json" else tomllib.loads(path.read_text())
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    # A run's config.json nests the agent config under "config", and so does a preset file (llm_gym.presets).
    if isinstance(data, dict) and isinstance(data.get("config"), dict) and ("agent" in data or "description" in data):
        data = data["config"]
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of key = value pairs")
    return data


def apply_overrides(config: C, overrides: Mapping[str, Any], source: str = "--set") -> C:
    """A copy of ``config`` with ``overrides`` applied; strings are converted to each field's type."""
    cls = type(config)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    renamed = getattr(cls, "renamed", {})
    nested = nested_agent_fields(cls)
    for key, raw in overrides.items():
        if key in renamed:
            raise ConfigError(f"{source}: {key!r} is now called {renamed[key]!r}; use {renamed[key]}={raw}")
        if key not in names:
            hint = did_you_mean(key, names) or "."
            raise ConfigError(f"{source}: unknown key {key!r} for {cls.__name__}{hint} Valid keys: {', '.join(names)}")
        try:
            changes[key] = coerce(raw, hints[key])
        except (TypeError, ValueError, OverflowError) as exc:
            raise ConfigError(f"{source}: {key}={raw!r} is not a valid {type_name(hints[key])} ({exc})") from exc
        if key in nested:  # another agent's settings: the keys given change, the others stay
            changes[key] = {**getattr(config, key), **changes[key]}
    problems = number_problems(cls, {n: changes[n] if n in changes else getattr(config, n) for n in names})
    if problems:  # before the config's own checks: they may compute with the bad number
        raise ConfigError(f"{source}: {'; '.join(problems)}")
    try:
        return dataclasses.replace(config, **changes)  # type: ignore[type-var]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def from_dict(cls: type[C], data: Mapping[str, Any], source: str = "config") -> C:
    """Build a config from a dict such as a run's saved ``config.json``.

    A run saved before a field was renamed (``cls.renamed``), before a field existed (``cls.saved_defaults``: the
    value the run trained with, where the default has changed since) or before None stopped meaning "off" still
    loads: old names are read as the new ones, a missing field as what it was then, and None where the field takes
    no None is read as 0 (off)."""
    renamed = getattr(cls, "renamed", {})
    hints = typing.get_type_hints(cls)
    data = {renamed.get(key, key): value for key, value in data.items()}
    data = {**getattr(cls, "saved_defaults", {}), **data}
    for key, value in data.items():
        if value is None and key in hints and type(None) not in typing.get_args(hints[key]):
            data[key] = 0
    return apply_overrides(cls(), data, source=source)


def coerce(value: Any, annotation: Any) -> Any:
    """Convert ``value`` (a CLI string or a parsed TOML/JSON value) to ``annotation``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        is_none = value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        if is_none and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is typing.Literal:
        for choice in args:
            if value == choice or str(value) == str(choice):
                return choice
        raise ValueError(f"choose one of {', '.join(map(str, args))}")
    if origin in (tuple, list):
        items = value
        if isinstance(value, str):
            items = json.loads(value) if value.strip().startswith("[") else [v for v in value.split(",") if v.strip()]
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(v, args[0]) for v in items)
        if origin is tuple and args:
            if len(items) != len(args):
                raise ValueError(f"expected {len(args)} values")
            return tuple(coerce(v, a) for v, a in zip(items, args, strict=True))
        return origin(coerce(v, args[0]) if args else v for v in items)
    if origin is dict or annotation is dict:
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, dict):
            raise ValueError("expected a table / JSON object")
        return dict(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        lowered = str(value).lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if annotation is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError("expected an integer")
        return int(float(value)) if isinstance(value, str) and "e" in value.lower() else int(value)
    if annotation is float:
        return float(value)
    if annotation is str:
        return str(value)
    if annotation is Any:
        return value
    if isinstance(annotation, type) and isinstance(value, annotation):
        return value
    raise TypeError(f"cannot convert to {type_name(annotation)}")


def type_name(annotation: Any) -> str:
    """How an error names a field's type: ``int``, ``float | None``, ``Literal['a', 'b']``."""
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
