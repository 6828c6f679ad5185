"""Multi-turn history for language-model agents: the last K observations and the moves taken after them.

:class:`TurnHistory` wraps any llm-gym env and adds ``info["turns"]``: a tuple of ``(observation text, action
text)`` pairs for the last K steps of the current episode, oldest first (empty right after ``reset``). The LM
policies render them as earlier chat turns (user: observation, assistant: move) before the current observation, so
a model can see motion across frames (Breakout's ball direction) and its own earlier moves.

The history lives in the env, not in the policy: the env knows where its episodes start, whichever loop steps it
(the evaluation's slots, a vector env's autoreset). ``llm_gym.envs.catalog.make(env_id, history=K)`` applies it,
so ``--env-arg history=K`` and the LM agents' ``history`` setting work with every env id. The move is the action's
name as the env lists it (``info["action_names"]``), or the text itself on envs whose action is text.

The turns are part of where an episode stands, so the wrapper is :class:`~llm_gym.envs.snapshots.Stateful`: a resumed
run's next prompt shows the same turns as the uninterrupted run's would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from llm_gym.envs.protocol import observation_text

TURNS_KEY = "turns"
"""The ``info`` key that carries the history."""

NAMING_KEYS = ("legal_actions", "action_names")
"""What naming the next action needs of an info (:func:`action_text`)."""


class TurnHistory(gym.Wrapper):
    """Adds ``info["turns"]``: the last ``turns`` (observation text, action text) pairs of the episode."""

    def __init__(self, env: gym.Env, turns: int) -> None:
        if turns < 1:
            raise ValueError(f"history must be >= 1 turn, got {turns}")
        super().__init__(env)
        self.turns = turns
        self._past: deque[tuple[str, str]] = deque(maxlen=turns)
        self._observation = ""
        """The current observation's text (its turn is added when the next step is taken)."""
        self._info: Mapping[str, Any] = {}
        """What naming the next action needs of the current info (the legal actions and their names)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._past.clear()
        return observation, self._remember(observation, info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        self._past.append((self._observation, action_text(action, self._info)))
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, self._remember(observation, info)

    def state_dict(self) -> dict[str, Any]:
        return {"past": list(self._past), "observation": self._observation, "info": dict(self._info)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._past = deque((tuple(turn) for turn in state["past"]), maxlen=self.turns)
        self._observation, self._info = state["observation"], dict(state["info"])

    def _remember(self, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        self._observation = observation_text(observation)
        self._info = {key: info[key] for key in NAMING_KEYS if key in info}
        info = dict(info)
        info[TURNS_KEY] = tuple(self._past)
        return info


def restore_turns(env: gym.Env, observation: Any, info: Mapping[str, Any]) -> None:
    """Put the :class:`TurnHistory` in ``env``'s wrappers (if any) where an episode stood at ``observation`` with
    ``info`` (its ``turns``): for a game state restored under it (``restore_state`` reaches the emulator or game
    only, and a reset before it left no turns). Envs without history are left alone."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, TurnHistory):
            layer.load_state_dict(
                {
                    "past": list(info.get(TURNS_KEY, ())),
                    "observation": observation_text(observation),
                    "info": {key: info[key] for key in NAMING_KEYS if key in info},
                }
            )
            return
        layer = layer.env


def action_text(action: Any, info: Mapping[str, Any]) -> str:
    """How a move reads in the history: its name among the legal actions of the step it was taken at."""
    if isinstance(action, str):
        return action
    legal, names = list(info.get("legal_actions", ())), list(info.get("action_names", ()))
    if int(action) in legal and len(names) == len(legal):
        return str(names[legal.index(int(action))])
    return str(int(action))
