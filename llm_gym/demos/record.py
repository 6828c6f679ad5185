"""Play episodes with any policy (or ground truth) and turn every decision into a :class:`DemoRecord`.

The envs step in lockstep through :class:`llm_gym.stepping.EnvStepper` (episode ``k`` resets with ``seed + k``,
whatever ``num_envs`` is), the prompt of each decision is built by :func:`llm_gym.lm.prompts.chat_messages` (what
``ppo_lora``, ``llm-gym play`` and the zero-shot agent send to the model), and each finished episode's lines are
appended to the file at once (:func:`llm_gym.demos.format.write_records`).

The answer of a decision is the chosen action's name from ``info["action_names"]`` (what score mode rates as the
whole answer), or the answer text itself where the env takes text (``Trace-v0``). On ``Trace-v0`` the
ground-truth source answers each task with its expected stdout, read from the env's task (the sandbox ran the
program), so its records score 1.0 by the env's own scoring; with ``trace_worked_answer`` the stdout follows a
worked solution in a ``<think>`` block, which the scoring drops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from llm_gym.actions import legal_action_name
from llm_gym.agent import EnvConfig, Policy, policy_action_values
from llm_gym.demos.format import DemoRecord, write_records
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.protocol import step_instructions
from llm_gym.envs.trace.worked import UnsupportedProgram, worked_answer
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.lm.prompts import chat_messages
from llm_gym.stepping import EnvStepper, make_vector_env

Answerer = Callable[[gym.Env], str]
"""Ground truth: the answer for the task an (unwrapped) env shows now."""


def trace_expected_stdout(env: gym.Env) -> str:
    """``Trace-v0``'s ground truth: the expected stdout of the task the env shows (what scores 1.0)."""
    return str(_trace_task(env).expected)


def trace_worked_answer(env: gym.Env) -> str:
    """``Trace-v0``'s ground truth with its work shown: a worked solution in ``<think>``, then the expected stdout
    (:mod:`llm_gym.envs.trace.worked`; straight-line programs, level 1)."""
    task = _trace_task(env)
    try:
        return worked_answer(task.program, task.expected)
    except UnsupportedProgram as exc:
        raise UnsupportedProgram(f"Trace task {task.task_id}: {exc}; worked solutions cover level 1") from None


def _trace_task(env: gym.Env) -> Any:
    task = getattr(env, "task", None)
    if task is None or not hasattr(task, "expected"):
        raise UnsupportedEnvError(f"{type(env).__name__} has no ground-truth task; demos from ground truth are Trace's")
    return task


@dataclass
class _Decision:
    messages: tuple[Mapping[str, str], ...]
    action: int | str
    task_id: int | None
    choices: tuple[str, ...] = ()
    choice_values: tuple[float, ...] = ()
    reward: float = 0.0


@dataclass
class DemoSummary:
    """What a recording run wrote."""

    path: Path
    episodes: int = 0
    decisions: int = 0
    returns: list[float] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    truncated: int = 0
    """Episodes cut at ``max_steps`` (or the env's time limit)."""
    unnamed: int = 0
    """Decisions left out because the policy chose an action the env did not list as legal (so it has no name)."""
    explored: int = 0
    """Decisions after which the env stepped with a random legal action instead of the policy's (``explore``)."""
    worst_return_by_seat: dict[int, float] = field(default_factory=dict)
    """A tree walk's lowest complete-game return in each seat: the policy's return against the best opponent there."""


def record_demos(
    policy: Policy | None,
    env: EnvConfig,
    episodes: int,
    out: str | Path,
    *,
    source: Mapping[str, Any],
    seed: int = 0,
    num_envs: int = 1,
    max_steps: int | None = None,
    task_ids: Sequence[int] | None = None,
    ground_truth: Answerer | None = None,
    on_episode: Callable[[DemoSummary], None] | None = None,
    explore: float = 0.0,
) -> DemoSummary:
    """Play ``episodes`` episodes and append one :class:`DemoRecord` per decision to ``out``.

    Args:
        policy: decides for a batch of envs (``act``); None with ``ground_truth``.
        env: the env id and its ``gym.make`` arguments (recorded in every line).
        episodes: how many episodes.
        out: the JSONL file (appended to, per finished episode).
        source: who decides (``agent``, ``config``, ``checkpoint``, ...), recorded in every line.
        seed: episode ``k`` resets with ``seed + k``.
        num_envs: envs stepped in lockstep (one ``act`` call for all).
        max_steps: cut each episode after this many steps.
        task_ids: the ``task_id`` reset option of episode ``k`` is ``task_ids[k % len]``; None lets the env draw.
        ground_truth: answers from the env's own task instead of a policy (``trace_expected_stdout``).
        on_episode: called with the running summary after each episode is written.
        explore: with this probability per decision the env steps with a uniformly random legal action instead of
            the policy's (drawn from a generator seeded by ``seed``), while the line keeps the policy's answer: the
            policy then labels positions its own play never reaches but a learner that strays from it does (noise
            injection, as in DART, Laskey et al. 2017). Rewards and returns-to-go are those of the play that happened.
    """
    if (policy is None) == (ground_truth is None):
        raise ValueError("record_demos takes a policy or ground_truth, exactly one")
    if not 0.0 <= explore < 1.0:
        raise ConfigError(f"explore is a probability per decision in [0, 1), got {explore}")
    traits = EnvTraits.probe(env)
    if explore and traits.text_actions:
        raise ConfigError(f"explore draws random legal actions; {env.env_id} takes free text: drop it")
    rng = np.random.default_rng([seed, 0x5EED])  # its own stream: the episodes' seeds stay the env's
    summary = DemoSummary(Path(out))
    num_envs = max(1, min(num_envs, episodes))
    envs = make_vector_env(env, num_envs, max_episode_steps=max_steps or 0)
    stepper = EnvStepper(envs, seed=seed, episodes=episodes, task_ids=task_ids)
    pending: list[list[_Decision]] = [[] for _ in range(num_envs)]
    args = dict(env.kwargs)
    try:
        stepper.reset()
        while not stepper.done:
            active = stepper.active
            observations = [stepper.observations[i] for i in active]
            infos = [stepper.infos[i] for i in active]
            values: list[tuple[float, ...]] | None = None
            if ground_truth is not None:
                actions: list[Any] = [ground_truth(envs.envs[i].unwrapped) for i in active]
            else:
                actions = list(policy.act(observations, infos))  # type: ignore[union-attr]
                if not traits.text_actions:
                    values = policy_action_values(policy, observations, infos)  # type: ignore[arg-type]
            for k, (slot, observation, info, action) in enumerate(
                zip(active, observations, infos, actions, strict=True)
            ):
                answer = _answer(action, info, traits.text_actions)
                turns = tuple(info.get(TURNS_KEY, ()))
                rules = step_instructions(info, traits.instructions)  # OpenSpiel-v0: the task's own rules
                messages = chat_messages(rules, observation, turns=turns)
                if answer is None:
                    summary.unnamed += 1
                    messages = ()
                else:
                    messages = (*messages, {"role": "assistant", "content": answer})
                choices = () if traits.text_actions else tuple(str(n) for n in info.get("action_names", ()))
                row = values[k] if values is not None else ()
                pending[slot].append(_Decision(tuple(messages), _plain(action), _task_id(info), choices, row))
            played = list(actions)
            for k, info in enumerate(infos if explore else ()):
                if rng.random() < explore:
                    played[k] = int(rng.choice(np.asarray(info["legal_actions"])))
                    summary.explored += 1
            transition = stepper.step(played)
            for slot in active:
                pending[slot][-1].reward = float(transition.rewards[slot])
            for episode in transition.finished:
                decisions, pending[episode.slot] = pending[episode.slot], []
                records = _records(decisions, episode, env.env_id, args, source)
                summary.decisions += write_records(summary.path, records)
                summary.episodes += 1
                summary.returns.append(float(episode.stats.episode_return))
                summary.scores.append(float(episode.stats.score))
                summary.lengths.append(int(episode.stats.length))
                summary.truncated += bool(episode.stats.truncated)
                if on_episode is not None:
                    on_episode(summary)
    finally:
        stepper.close()
    return summary


def _records(
    decisions: list[_Decision], episode: Any, env_id: str, env_args: Mapping[str, Any], source: Mapping[str, Any]
) -> list[DemoRecord]:
    to_go, rewards_to_go = 0.0, []
    for decision in reversed(decisions):
        to_go += decision.reward
        rewards_to_go.append(to_go)
    rewards_to_go.reverse()
    stats = episode.stats
    return [
        DemoRecord(
            messages=d.messages,
            env_id=env_id,
            env_args=dict(env_args),
            seed=episode.seed,
            episode=episode.index,
            step=step,
            task_id=d.task_id,
            action=d.action,
            choices=d.choices,
            choice_values=d.choice_values,
            reward=d.reward,
            return_to_go=rewards_to_go[step],
            episode_return=float(stats.episode_return),
            episode_score=float(stats.score),
            source=dict(source),
        )
        for step, d in enumerate(decisions)
        if d.messages  # a decision whose action had no name cannot be an answer (counted in DemoSummary.unnamed)
    ]


def _answer(action: Any, info: Mapping[str, Any], text_actions: bool) -> str | None:
    """The answer text of ``action``: its name among the legal actions (score mode's choices), or the text."""
    return str(action) if text_actions else legal_action_name(action, info)


def _plain(action: Any) -> int | str:
    return action if isinstance(action, str) else int(action)


def _task_id(info: Mapping[str, Any]) -> int | None:
    task_id = info.get("task_id")
    return None if task_id is None else int(task_id)
