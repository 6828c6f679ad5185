"""Any llm-gym id as a verifiers environment (verifiers 0.4, ``verifiers.v1``; extra ``verifiers``).

verifiers finds a taskset by a top-level import name: the distribution installs the module ``llm_gym_verifiers``,
which re-exports this module's ``Taskset`` (the rows), ``Env`` (the episode loop) and ``Harness`` (how the model is
asked), so ``vf-eval`` and prime-rl load taskset ``llm-gym-verifiers`` without further flags::

    vf-eval llm-gym-verifiers --env.taskset.env-id OpenSpiel-tic_tac_toe-v0 \\
        --env.taskset.split eval -m MODEL --client.base-url http://127.0.0.1:8000/v1 --no-push

:func:`load_environment` builds the same environment in Python (``load_environment(env_id=..., **env_args)``).

* **Rows**: one task per (task id, seed); ``split="train"`` takes the first ``train_size`` seeds from ``seed``,
  ``split="eval"`` the next ``eval_size`` (held out: no seed of one split is in the other). ``task_ids`` (cycled)
  picks the task of each row where the env has task ids.
* **Episode**: the task's prompt is the first decision as llm-gym's LM agents see it (the step's rules as the
  system prompt, the observation as the user's). Each answer is stepped through the shared parser
  (:mod:`llm_gym.integrations.episode`); the next observation comes back as the user's next turn, until the episode
  ends. The conversation keeps every turn (like ``history`` without a limit).
* **Reward**: ``llm_gym_return``, the episode's return (parse penalties included); the trace's info carries the
  steps, invalid answers and the env's own score.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any, Literal

from llm_gym.errors import MissingDependencyError
from llm_gym.integrations.episode import TextEpisode

try:
    import httpx
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.runtimes import ProgramResult
    from verifiers.v1.runtimes.subprocess import SubprocessConfig
except ImportError as exc:
    raise MissingDependencyError("the verifiers environment (llm-gym-verifiers)", "verifiers") from exc

TASKSET_ID = "llm-gym-verifiers"


class LLMGymTasksetConfig(vf.TasksetConfig):
    env_id: str = "OpenSpiel-tic_tac_toe-v0"
    """The llm-gym id every task plays (see `llm-gym envs`)."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for gym.make (e.g. {"opponent": "mcts"}, {"history": 0})."""
    split: Literal["train", "eval"] = "train"
    """train: the first train_size seeds from `seed`; eval: the eval_size seeds after them (held out)."""
    seed: int = Field(0, ge=0)
    """The first seed of the train split."""
    train_size: int = Field(64, ge=1)
    eval_size: int = Field(16, ge=1)
    task_ids: list[int] = Field(default_factory=list)
    """Task ids, cycled over the rows (empty: the env's default task)."""


class LLMGymData(vf.TaskData):
    env_id: str
    env_args: dict[str, Any]
    seed: int
    task_id: int | None


class LLMGymTask(vf.Task[LLMGymData]):
    pass


class LLMGymTaskset(vf.Taskset[LLMGymTask, LLMGymTasksetConfig]):
    def load(self) -> Iterator[LLMGymTask]:
        config = self.config
        start = config.seed if config.split == "train" else config.seed + config.train_size
        size = config.train_size if config.split == "train" else config.eval_size
        task_ids = itertools.cycle(config.task_ids) if config.task_ids else itertools.repeat(None)
        episode = TextEpisode(config.env_id, config.env_args)
        try:
            for index, (seed, task_id) in enumerate(zip(range(start, start + size), task_ids, strict=False)):
                turn = episode.reset(seed=seed, task_id=task_id)
                system, user = _split(turn.messages)
                yield LLMGymTask(
                    LLMGymData(
                        idx=index,
                        name=f"{config.env_id}#{config.split}/seed={seed}"
                        + ("" if task_id is None else f"/task={task_id}"),
                        prompt=user,
                        system_prompt=system,
                        env_id=config.env_id,
                        env_args=dict(config.env_args),
                        seed=seed,
                        task_id=task_id,
                    ),
                    config.task,
                )
        finally:
            episode.close()


class LLMGymEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())
    """The model's seat; it runs in-process (the episode needs no sandbox: the env steps on the host)."""


class LLMGymEnv(vf.Env[LLMGymEnvConfig]):
    async def run(self, task, agents):
        data = task.data
        episode = await asyncio.to_thread(TextEpisode, data.env_id, data.env_args)
        total, invalid = 0.0, 0
        try:
            turn = await asyncio.to_thread(episode.reset, data.seed, data.task_id)
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the first decision is the task's prompt: the model speaks first
                while not segment.terminated:
                    turn = await asyncio.to_thread(episode.step, segment.last_reply)
                    total += turn.reward
                    invalid += bool(turn.info.get("invalid_action"))
                    if turn.done:
                        break
                    segment = await interaction.turn(_split(turn.messages)[1])
            trace = interaction.trace
            trace.record_reward("llm_gym_return", total, 1.0)
            trace.info["llm_gym"] = {
                "env_id": data.env_id,
                "seed": data.seed,
                "task_id": data.task_id,
                "steps": episode.steps,
                "done": turn.done,
                "invalid_answers": invalid,
                "score": turn.info.get("score"),
            }
        finally:
            episode.close()


class LLMGymHarnessConfig(vf.HarnessConfig):
    request_timeout: float = 600.0
    """Seconds one model call may take."""


class LLMGymHarness(vf.Harness[LLMGymHarnessConfig]):
    """One chat completion per turn, made in-process through the rollout's interception endpoint (verifiers
    records every call there): llm-gym's episode needs no program or sandbox of its own."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages += [message_to_wire(m) for m in prompt if not (system and m.role == "system")]
        async with httpx.AsyncClient(timeout=self.config.request_timeout) as client:
            response = await client.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                json={"model": ctx.model, "messages": messages},
                headers={"Authorization": f"Bearer {secret}"},
            )
        if response.status_code >= 400:
            return ProgramResult(
                exit_code=1, stdout="", stderr=f"model call answered {response.status_code}: {response.text}"
            )
        return ProgramResult(exit_code=0, stdout=json.dumps(response.json().get("usage") or {}), stderr="")


def load_environment(env_id: str = "OpenSpiel-tic_tac_toe-v0", **env_args: Any) -> vf.Env:
    """The verifiers environment of ``env_id`` (``env_args`` go to ``gym.make``). Taskset settings (``split``,
    ``seed``, ``train_size``, ``eval_size``, ``task_ids``) may be passed here too."""
    taskset_fields = set(LLMGymTasksetConfig.model_fields) - {"env_id", "env_args"}
    taskset = {k: env_args.pop(k) for k in list(env_args) if k in taskset_fields}
    config = {"taskset": {"id": TASKSET_ID, "env_id": env_id, "env_args": env_args, **taskset}}
    return vf.load_environment(vf.resolve_env_config(config))


def _split(messages: list[dict[str, str]]) -> tuple[str | None, str]:
    """(system prompt, the last user message) of a decision's chat messages."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    return system, messages[-1]["content"]


__all__ = ["LLMGymEnv", "LLMGymHarness", "LLMGymTaskset", "load_environment"]
