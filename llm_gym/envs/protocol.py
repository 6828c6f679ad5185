"""The contract every llm-gym env keeps, written down in one place, and the only code that reads it.

An llm-gym env is a Gymnasium env with three additions:

* attributes on the unwrapped env (:class:`LLMEnv`): ``instructions`` (the rules, for a system prompt) and,
  optionally, ``noop_action`` (what a failed parse falls back to), ``action_aliases`` (extra names the shared parser
  accepts) and ``clone_state()`` / ``restore_state()`` (:class:`Snapshotting`: exact snapshots, RNG included);
* ``info`` keys (:class:`StepInfo`): a ``Discrete`` env names its legal actions in every info; ``raw_reward`` and
  ``score`` report the game's own numbers where the env shapes its reward;
* an action space that is ``Discrete`` (actions named in info) or ``Text`` (free-text answers, e.g. ``Trace-v0``).

Agents, policies and wrappers read these through the helpers below, never with ``getattr`` of their own, so a new
family knows what to provide and :func:`llm_gym.check_llm_env` can check it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import gymnasium as gym
import numpy as np

from llm_gym.errors import UnsupportedEnvError


class StepInfo(TypedDict, total=False):
    """The ``info`` keys llm-gym envs fill (``reset`` and ``step``). Families add their own keys besides these."""

    legal_actions: Sequence[int]
    """Ids of the actions legal now. Required on ``Discrete`` envs."""
    action_names: Sequence[str]
    """The name of each legal action, in the order of ``legal_actions`` (what a model reads and answers with)."""
    action_mask: np.ndarray
    """``(action_space.n,)`` bool: True exactly at ``legal_actions``."""
    raw_reward: float
    """The game's own reward of this step (the reward itself may include shaping or penalties)."""
    score: float | None
    """The game's score so far (Atari: points; OpenSpiel: a 0..1 score of the outcome), where the game has one."""
    invalid_action: bool
    """This step's action (text) named no legal action and the fallback was taken."""
    invalid_action_penalty: float
    """What was subtracted from this step's reward for an invalid action."""
    invalid_actions: int
    """Invalid actions so far in this episode."""
    lives: int
    """Lives left (Atari)."""
    task_id: int
    """The task this episode plays (``reset(options={"task_id": N})`` chooses it)."""
    instructions: str
    """The rules of the task this episode plays, where they change with the task (``OpenSpiel-v0``: each game and
    opponent has its own); a prompt takes them over the env's ``instructions`` attribute."""
    game_state: Any
    """The decoded game state (Atari: RAM-derived positions), for scripted policies and tests."""


INFO_KEYS: tuple[str, ...] = tuple(StepInfo.__annotations__)
"""Every key :class:`StepInfo` names."""


@dataclass(frozen=True)
class InvalidActionPolicy:
    """What happens when a model's text names no legal action.

    Envs take it as a setting (OpenSpiel's illegal ids) and :class:`llm_gym.actions.TextActions` applies it to
    answers; it lives here, with the contract, so that envs never import the parser's module.
    """

    fallback: Literal["noop", "random"] = "noop"
    """``noop``: the env's no-op action (a random legal one where the game has none); ``random``: a random legal one."""
    penalty: float = 0.1
    """Subtracted from the step's reward (recorded as ``info["invalid_action_penalty"]``)."""


@runtime_checkable
class LLMEnv(Protocol):
    """Attributes of an unwrapped llm-gym env. Only ``instructions`` is required; the others are read with
    :func:`noop_action` and :func:`action_aliases`, which give ``None`` / ``{}`` for an env without them."""

    instructions: str
    """The rules of the game for a system prompt: what an observation shows and how to answer."""


class OptionalEnvAttributes(Protocol):
    """What an env may carry besides ``instructions`` (documentation; read through the helpers)."""

    noop_action: int | None
    """The action a failed parse falls back to; None where the game has none (a random legal action is taken)."""
    action_aliases: Mapping[str, int]
    """Extra names the shared parser accepts for actions (say ALE's ``UPFIRE``), besides ``action_names``."""


@runtime_checkable
class Snapshotting(Protocol):
    """Envs that can put themselves back exactly where they were (ALE, OpenSpiel): exact resume, replayed
    corrections. A snapshot holds everything later steps depend on, RNG included."""

    def clone_state(self) -> Any: ...

    def restore_state(self, snapshot: Any) -> None: ...


# -- readers ---------------------------------------------------------------------------------------------------


def env_instructions(env: Any) -> str:
    """The rules text an llm-gym env carries as ``instructions`` ('' for an env without one)."""
    return str(getattr(_unwrapped(env), "instructions", "") or "")


def observation_text(observation: Any) -> str:
    """The text of an observation: a string as is, the ``text`` entry of a dict (vision envs), else ``str()``."""
    if isinstance(observation, str):
        return observation
    if isinstance(observation, Mapping) and isinstance(observation.get("text"), str):
        return observation["text"]
    return str(observation)


def step_instructions(info: Mapping[str, Any], default: str) -> str:
    """The rules for a prompt built from this step's observation: the task's own (``info["instructions"]``) where
    the env gives them, else ``default`` (the env's ``instructions``, which then never change)."""
    rules = info.get("instructions")
    return default if rules is None else str(rules)


def noop_action(env: Any) -> int | None:
    """The env's no-op action id, or None."""
    noop = getattr(_unwrapped(env), "noop_action", None)
    return None if noop is None else int(noop)


def action_aliases(env: Any) -> dict[str, int]:
    """Extra action names the shared parser accepts (``{}`` for none)."""
    return {str(k): int(v) for k, v in (getattr(_unwrapped(env), "action_aliases", None) or {}).items()}


def can_snapshot(env: Any) -> bool:
    """Whether the env has ``clone_state`` and ``restore_state``."""
    return isinstance(_unwrapped(env), Snapshotting)


def takes_text(env: gym.Env) -> bool:
    """Whether the env's action is free text (a ``Text`` action space) rather than an action id."""
    return isinstance(env.action_space, gym.spaces.Text)


def legal_choices(info: Mapping[str, Any], env_id: str) -> tuple[list[int], list[str]]:
    """The legal action ids and their names from an env's ``info``."""
    if "legal_actions" not in info or "action_names" not in info:
        raise UnsupportedEnvError(
            f"{env_id} does not list legal actions in info (legal_actions, action_names), so score mode cannot rank "
            "them; use --set action_mode=generate"
        )
    return [int(a) for a in info["legal_actions"]], [str(n) for n in info["action_names"]]


def _unwrapped(env: Any) -> Any:
    return getattr(env, "unwrapped", env)
