"""One llm-gym episode played by text: what every trainer integration shares.

``llm-gym serve`` (OpenEnv), the verifiers environment and the TRL recipe all present an env the way llm-gym's own
LM agents see it and score it the same way:

* the prompt is :func:`llm_gym.lm.prompts.chat_messages` of the step's rules (the task's own where the env gives
  them, else the env's ``instructions``), the observation and the episode's earlier turns (with ``history=K``);
* a model's answer becomes an action through the shared parser, applied by :class:`llm_gym.actions.TextActions`
  (an unparseable answer: the env's no-op and the stated penalty, counted in ``info``); envs whose action is text
  (``Trace-v0``) take the answer itself;
* the reward is the env's reward for that step, the parse penalty included.

So a trajectory played through any of them equals the same actions played in-process on the same seed and task id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llm_gym.actions import InvalidActionPolicy, TextActions, legal_action_name
from llm_gym.envs.catalog import make
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.protocol import env_instructions, step_instructions, takes_text
from llm_gym.errors import EnvInputError, LLMGymError, suggest
from llm_gym.lm.prompts import chat_messages, observation_text


class EpisodeStateError(LLMGymError):
    """A step the episode cannot take now: before the first reset, or after the episode ended."""


@dataclass(frozen=True)
class Turn:
    """Where an episode stands after a reset or a step, as an LM agent sees it."""

    observation: Any
    """The env's observation (text; ``{"image", "text"}`` on vision envs)."""
    messages: list[dict[str, str]]
    """The chat messages llm-gym's LM agents are prompted with for the next decision."""
    legal_actions: list[int]
    """Ids of the legal actions (empty on envs whose action is text)."""
    action_names: list[str]
    """Their names: what a model answers with."""
    reward: float = 0.0
    """The step's reward (0 after a reset), the parse penalty included."""
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def text(self) -> str:
        """The observation's text."""
        return observation_text(self.observation)


class TextEpisode:
    """One env instance stepped with text (or legal action ids), as llm-gym's LM agents step it.

    Args:
        env_id: a registered llm-gym id (unknown ids raise with close matches).
        env_kwargs: keyword arguments for ``gym.make`` (``history=K`` adds the last K turns to the prompt).
        invalid: what an answer that names no legal action does (default: no-op and a 0.1 penalty).
    """

    def __init__(
        self, env_id: str, env_kwargs: Mapping[str, Any] | None = None, invalid: InvalidActionPolicy | None = None
    ) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        base = make(env_id, **self.env_kwargs)
        self.text_actions = takes_text(base)
        self.env: gym.Env = base if self.text_actions else TextActions(base, invalid)
        self.instructions = env_instructions(base)
        self.last: Turn | None = None
        self.steps = 0

    def reset(self, seed: int | None = None, task_id: int | None = None) -> Turn:
        """A new episode; ``task_id`` picks the task (``reset(options={"task_id": N})``)."""
        options = None if task_id is None else {"task_id": int(task_id)}
        observation, info = self.env.reset(seed=seed, options=options)
        self.steps = 0
        self.last = self._turn(observation, 0.0, False, False, info)
        return self.last

    def step(self, answer: str | None = None, action_id: int | None = None) -> Turn:
        """One step with a model's answer (parsed by the shared parser) or a legal action id."""
        if self.last is None:
            raise EpisodeStateError("no episode yet: reset first")
        if self.last.done:
            raise EpisodeStateError(f"the episode ended after {self.steps} steps: reset to start a new one")
        if (answer is None) == (action_id is None):
            raise EnvInputError("give exactly one of an answer (text) or a legal action id")
        if action_id is not None:
            answer = self._action_text(action_id)
        observation, reward, terminated, truncated, info = self.env.step(answer)
        self.steps += 1
        self.last = self._turn(observation, float(reward), bool(terminated), bool(truncated), info)
        return self.last

    def close(self) -> None:
        self.env.close()

    def _action_text(self, action_id: int) -> str:
        if self.text_actions:
            raise EnvInputError(f"{self.env_id} takes text, not an action id: send the answer as text")
        assert self.last is not None
        name = legal_action_name(action_id, self.last.info)
        if name is None:
            legal = ", ".join(f"{a}={n}" for a, n in zip(self.last.legal_actions, self.last.action_names, strict=False))
            raise EnvInputError(f"action id {action_id} is not legal now; legal: {legal}")
        return name

    def _turn(self, observation: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> Turn:
        rules = step_instructions(info, self.instructions)
        messages = chat_messages(rules, observation, turns=tuple(info.get(TURNS_KEY, ())))
        legal = [int(a) for a in info.get("legal_actions", ())]
        names = [str(n) for n in info.get("action_names", ())]
        return Turn(observation, messages, legal, names, reward, terminated, truncated, dict(info))


def check_reset_arguments(given: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """An unknown reset argument is named with its close matches and the ones that are known."""
    for key in given:
        if key not in known:
            close = suggest(key, known)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise EnvInputError(f"unknown reset argument {key!r}{hint} (known: {', '.join(known)})")
