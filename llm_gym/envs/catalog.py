"""What envs exist and how to make one with a helpful error: the CLI and the agents go through here.

:class:`EnvConfig` names an env (id and ``gym.make`` arguments) and makes it through :func:`make`; :class:`EnvTraits`
is what a policy or trainer reads once from an instance, through the readers of :mod:`llm_gym.envs.protocol`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import llm_gym.envs  # noqa: F401  (registers the ids)
from llm_gym.envs.history import TurnHistory
from llm_gym.envs.protocol import (
    action_aliases,
    can_snapshot,
    env_instructions,
    noop_action,
    takes_text,
)
from llm_gym.errors import ConfigError, UnknownNameError, suggest

_PREFIXES = ("LLMBreakout", "LLMPong", "OpenSpiel-", "Trace-")


def env_ids() -> list[str]:
    """Every env id llm-gym registers, sorted."""
    return sorted(i for i in gym.registry if i.startswith(_PREFIXES))


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The registry entry of ``env_id``; unknown ids raise with the closest matches."""
    if env_id not in gym.registry:
        raise UnknownNameError("env", env_id, env_ids(), hint="Run `llm-gym envs` to list them.")
    return gym.registry[env_id]


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` with one-line errors: unknown ids get close matches, rejected keyword arguments are named.

    ``history=K`` (any id) wraps the env in :class:`llm_gym.envs.history.TurnHistory`: the last K turns in info.
    """
    env_spec(env_id)
    history = kwargs.pop("history", 0)
    if history:
        try:
            turns = int(history)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"history={history!r} is not a number of turns") from exc
        if turns < 0:
            raise ConfigError(f"history={turns} must be >= 0 (turns of the episode shown to an LM agent)")
        if not turns:
            return make(env_id, **kwargs)
        return TurnHistory(make(env_id, **kwargs), turns)
    if not kwargs:
        return gym.make(env_id)
    _check_argument_names(env_id, kwargs)
    try:
        return gym.make(env_id, **kwargs)
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise ConfigError(f"{env_id} rejects {given}: {exc}") from exc


def env_arguments(env_id: str) -> list[str] | None:
    """The keyword arguments ``gym.make(env_id, ...)`` takes (``history`` included), read from the env class's
    ``__init__`` and, where it passes ``**kwargs`` on, its bases'; None where they cannot be known."""
    creator = _creator(env_id)
    names = {"history", "max_episode_steps", "disable_env_checker"}  # (the last two: gym.make's own)
    for klass in creator.__mro__ if isinstance(creator, type) else ():
        init = vars(klass).get("__init__")
        if init is None:
            continue
        if klass is object:
            return None  # a **kwargs that reaches object: nothing named
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return sorted(names)
    return None


def _check_argument_names(env_id: str, kwargs: dict[str, Any]) -> None:
    """An argument the env does not take is named with its close matches and the ones it does take."""
    known = env_arguments(env_id)
    if known is None:
        return
    for key in kwargs:
        if key not in known:
            close = suggest(key, known)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(f"{env_id} takes no argument {key!r}{hint} (it takes: {', '.join(known)})")


def _creator(env_id: str) -> Any:
    entry = env_spec(env_id).entry_point
    return gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry


def render_modes(env_id: str) -> list[str]:
    """The render modes the env's class declares, read without making an env."""
    return list(getattr(_creator(env_id), "metadata", {}).get("render_modes", []))


def training_defaults(env_id: str) -> dict[str, Any]:
    """The env arguments the env's class asks learning agents to train with (``training_defaults``; Atari: FIRE on
    reset and a life loss ends the episode), read without making an env; ``{}`` for most envs."""
    return dict(getattr(_creator(env_id), "training_defaults", None) or {})


def evaluation_overrides(env_id: str) -> dict[str, Any]:
    """The env arguments every evaluation sets whatever training used (``evaluation_overrides``; Atari: whole
    games, no episode end on a life loss); ``{}`` for most envs."""
    return dict(getattr(_creator(env_id), "evaluation_overrides", None) or {})


def reward_only_args(env_id: str) -> frozenset[str]:
    """The env arguments that change only the reward (``reward_only_args``; Atari: the shaping, Trace: the scoring
    rule): a play without them plays the same game, so ``llm-gym play`` does not ask for them."""
    return frozenset(getattr(_creator(env_id), "reward_only_args", None) or ())


def env_family(env_id: str) -> str:
    """``atari``, ``openspiel``, ``trace`` or ``other``: which subpackage implements the id."""
    entry = str(env_spec(env_id).entry_point)
    for family in ("atari", "openspiel", "trace"):
        if f"llm_gym.envs.{family}" in entry:
            return family
    return "other"


# -- what agents learn about an env once, from the contract ------------------------------------------------------------


@dataclass(frozen=True)
class EnvConfig:
    """Which env to train or play on, and the keyword arguments for ``gym.make``."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self, **overrides: Any) -> gym.Env:
        """A new env (unknown ids raise with close matches)."""
        return make(self.env_id, **{**self.kwargs, **overrides})


@dataclass(frozen=True)
class EnvTraits:
    """What a policy or trainer needs to know about an env, read once from one instance."""

    instructions: str
    """The rules text (system prompt)."""
    aliases: dict[str, int]
    """Extra action names for the parser."""
    noop: int | None
    """The no-op action, or None."""
    text_actions: bool
    """The action is free text (``Text`` action space)."""
    renders_frames: bool
    """The env can render ``rgb_array`` frames (videos)."""
    snapshots: bool
    """The env has ``clone_state`` / ``restore_state``."""

    @classmethod
    def of(cls, env: gym.Env) -> EnvTraits:
        """The traits of a live env."""
        return cls(
            instructions=env_instructions(env),
            aliases=action_aliases(env),
            noop=noop_action(env),
            text_actions=takes_text(env),
            renders_frames="rgb_array" in (env.metadata.get("render_modes") or []),
            snapshots=can_snapshot(env),
        )

    @classmethod
    def probe(cls, env: EnvConfig) -> EnvTraits:
        """The traits of ``env``, read from one instance made and closed for the purpose."""
        made = env.make()
        try:
            return cls.of(made)
        finally:
            made.close()
