"""An llm-gym id as an OpenEnv ``Environment``: one instance per session, made by openenv-core's server.

The wire types are openenv-core's ``Action`` / ``Observation`` / ``State`` with llm-gym's fields:
* reset data: ``seed``, ``task_id``, ``episode_id`` (anything else is refused with close matches);
* an action: ``{"text": "<the model's answer>"}`` (parsed by the shared parser, as llm-gym's LM agents are) or
  ``{"action_id": N}`` (a legal id); exactly one of the two;
* an observation: the chat ``messages`` llm-gym's agents are prompted with, the observation ``text`` (and a vision
  env's ``image``), the legal actions and their names, ``reward``, ``done`` and the step's ``info``.

Every refusal raises an :class:`~llm_gym.errors.LLMGymError` whose message says what to send instead; openenv-core
reports it to that session alone, and the session (and every other) goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import ConfigDict, Field

from llm_gym import __version__
from llm_gym.errors import EnvInputError, suggest
from llm_gym.integrations.episode import EpisodeStateError, TextEpisode, Turn, check_reset_arguments
from llm_gym.serve.wire import to_wire

RESET_ARGUMENTS = ("seed", "task_id", "episode_id")
ACTION_FIELDS = ("text", "action_id")


class LLMGymAction(Action):
    """One move: the model's answer as ``text``, or a legal ``action_id``."""

    # Extra fields are let through pydantic and refused in ``step`` with close matches ("did you mean 'text'?"),
    # rather than as a bare validation error.
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    text: str | None = Field(default=None, description="The model's answer; the shared parser reads an action from it.")
    action_id: int | None = Field(default=None, description="A legal action id (see legal_actions).")


class LLMGymObservation(Observation):
    """What an llm-gym LM agent sees at a decision, and what the last step gave."""

    env_id: str = Field(description="The llm-gym id this session plays.")
    messages: list[dict[str, str]] = Field(description="The chat messages llm-gym's LM agents are prompted with.")
    text: str = Field(description="The observation's text.")
    image: dict[str, Any] | None = Field(default=None, description="A vision env's frame: shape, dtype, base64 bytes.")
    legal_actions: list[int] = Field(default_factory=list, description="Ids of the legal actions.")
    action_names: list[str] = Field(default_factory=list, description="The legal actions' names, in that order.")
    terminated: bool = False
    truncated: bool = False
    task_id: int | None = None
    seed: int | None = None
    step: int = Field(default=0, description="Steps taken in this episode.")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info for this step, as JSON.")


class LLMGymState(State):
    """The session's episode: its id, steps, env, seed, task id and whether it has ended."""

    env_id: str = ""
    seed: int | None = None
    task_id: int | None = None
    done: bool = False


@dataclass(frozen=True)
class ServeSpec:
    """Which env every session of a server plays, and the limits a session's input is held to."""

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_action_chars: int = 65536
    """The longest answer (``text``) a step accepts."""


class LLMGymEnvironment(Environment[LLMGymAction, LLMGymObservation, LLMGymState]):
    """One session's env. openenv-core's server makes one per session, in that session's own thread."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, spec: ServeSpec) -> None:
        super().__init__()
        self.spec = spec
        self.episode = TextEpisode(spec.env_id, spec.env_kwargs)
        self._state = LLMGymState(env_id=spec.env_id)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> LLMGymObservation:
        check_reset_arguments(kwargs, RESET_ARGUMENTS)
        task_id = kwargs.get("task_id")
        for name, value in (("seed", seed), ("task_id", task_id)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise EnvInputError(f"{name}={value!r} must be a whole number >= 0")
        turn = self.episode.reset(seed=seed, task_id=task_id)
        task = turn.info.get("task_id", task_id)
        self._state = LLMGymState(
            episode_id=episode_id or str(uuid.uuid4()),
            env_id=self.spec.env_id,
            seed=seed,
            task_id=None if task is None else int(task),
        )
        return self._observation(turn)

    def step(self, action: LLMGymAction, timeout_s: float | None = None, **kwargs: Any) -> LLMGymObservation:
        extra = sorted((action.model_extra or {}).keys())
        if extra:
            close = suggest(extra[0], ACTION_FIELDS)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise EnvInputError(
                f"unknown action field {extra[0]!r}{hint}; an action is {{'text': answer}} or {{'action_id': N}}"
            )
        if action.text is not None and len(action.text) > self.spec.max_action_chars:
            raise EnvInputError(
                f"the answer has {len(action.text):,} characters; this server takes at most "
                f"{self.spec.max_action_chars:,} (llm-gym serve --max-action-chars)"
            )
        if self.episode.last is not None and self.episode.last.done:
            raise EpisodeStateError(
                f"episode {self._state.episode_id} ended after {self.episode.steps} steps: reset to start a new one"
            )
        turn = self.episode.step(answer=action.text, action_id=action.action_id)
        self._state.step_count = self.episode.steps
        self._state.done = turn.done
        return self._observation(turn)

    @property
    def state(self) -> LLMGymState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        rules = self.episode.instructions.strip().splitlines()
        return EnvironmentMetadata(
            name=self.spec.env_id,
            description=rules[0] if rules else f"llm-gym {self.spec.env_id}",
            version=__version__,
            author="llm-gym",
        )

    def close(self) -> None:
        self.episode.close()

    def _observation(self, turn: Turn) -> LLMGymObservation:
        image = turn.observation.get("image") if isinstance(turn.observation, Mapping) else None
        info = {k: v for k, v in turn.info.items() if k not in ("legal_actions", "action_names", "action_mask")}
        return LLMGymObservation(
            env_id=self.spec.env_id,
            messages=turn.messages,
            text=turn.text,
            image=None if image is None else to_wire(image),
            legal_actions=turn.legal_actions,
            action_names=turn.action_names,
            reward=turn.reward,
            done=turn.done,
            terminated=turn.terminated,
            truncated=turn.truncated,
            task_id=self._state.task_id,
            seed=self._state.seed,
            step=self.episode.steps,
            info=to_wire(info),
        )
