"""Baseline agents that do not learn: ``random`` (uniform over legal actions), ``constant`` (one named action at
every step) and ``scripted`` (a ball tracker for Breakout and Pong), and the bases of the OpenSpiel ones (``mcts``,
``solver``, ``best_response``: :class:`OpenSpielAgent`, :class:`OpenSpielPolicy`). Training one records how it
plays, so its curve sits beside the learners' in TensorBoard."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np

import llm_gym
from llm_gym.agent import Agent, AgentConfig, DecisionDetails, EnvConfig, Policy
from llm_gym.callbacks import Callback, should_stop
from llm_gym.envs.catalog import env_family
from llm_gym.errors import UnknownNameError, UnsupportedEnvError
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.training.evaluation import Stopwatch, run_episodes


class RandomPolicy:
    """Uniform over each env's legal actions."""

    stochastic = True
    """Its actions are draws (exact evaluation reads its probabilities, never one draw per position)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        return [int(self.rng.choice(np.asarray(info["legal_actions"]))) for info in infos]

    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[int], list[DecisionDetails]]:
        """The actions, and the uniform probability of each legal action."""
        details = [
            DecisionDetails(probs=[1.0 / len(info["legal_actions"])] * len(info["legal_actions"])) for info in infos
        ]
        return self.act(observations, infos), details


class ConstantPolicy:
    """The same named action at every step: the floor a learner must clear on games where one action scores (with
    FIRE on reset, LEFT at every step scores ~7 in Breakout). Where that action is not legal at a step, the first
    legal one."""

    def __init__(self, env: EnvConfig, action: str) -> None:
        probe = env.make()
        try:
            _, info = probe.reset(seed=0)
        finally:
            probe.close()
        names = [str(name) for name in info.get("action_names", ())]
        if not names:
            raise UnsupportedEnvError(f"{env.env_id} does not name its actions in info; the constant agent needs them")
        if action.upper() not in {name.upper() for name in names}:
            raise UnknownNameError(
                "action", action, names, hint=f"Pass one of the actions {env.env_id} lists: --set action=NAME"
            )
        self.action = action.upper()

    def _choice(self, info: Mapping[str, Any]) -> tuple[int, list[float]]:
        names = [str(name).upper() for name in info["action_names"]]
        index = names.index(self.action) if self.action in names else 0
        return int(info["legal_actions"][index]), [float(i == index) for i in range(len(names))]

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        return [self._choice(info)[0] for info in infos]

    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[int], list[DecisionDetails]]:
        """The actions, and probability 1 on the chosen one."""
        choices = [self._choice(info) for info in infos]
        return [action for action, _ in choices], [DecisionDetails(probs=probs) for _, probs in choices]


class ScriptedPolicy:
    """Follows the game's hand-written heuristic (``AtariGame.scripted_action``) on the decoded game state."""

    def __init__(self, env: EnvConfig, aim: str = "ball", deadband: int = 0) -> None:
        probe = env.make()
        try:
            game = getattr(probe.unwrapped, "game", None)
            if game is None or not hasattr(game, "scripted_action"):
                raise UnsupportedEnvError(
                    f"the scripted agent knows Breakout and Pong only, not {env.env_id}; try --agent random"
                )
            ale_names = probe.unwrapped.ale_action_names
        finally:
            probe.close()
        if aim not in game.scripted_aims:
            raise UnsupportedEnvError(
                f"the scripted agent cannot aim at {aim!r} in {env.env_id} (it aims at: "
                f"{', '.join(game.scripted_aims)}); pass --set aim={game.scripted_aims[0]}"
            )
        self.game, self.aim, self.deadband = game, aim, deadband
        self.action_of = {name: i for i, name in enumerate(ale_names)}

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        return [
            self.action_of[self.game.scripted_action(info["game_state"], aim=self.aim, deadband=self.deadband)]
            for info in infos
        ]


class BaselineAgent(Agent):
    """Shared by the agents that do not learn: ``train`` plays episodes until ``total_steps`` and logs their returns,
    so their curves sit beside the learners' in TensorBoard. A config with ``num_envs`` plays that many episodes in
    lockstep (one batched ``act`` per step)."""

    learns = False

    def summary_extras(self, policy: Policy) -> dict[str, Any]:
        """Agent-specific fields for ``summary.json`` (the LM agent adds its model and parse failures)."""
        return {}

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        config = self.config
        num_envs = max(1, int(getattr(config, "num_envs", 1)))
        policy = self.policy(env)
        for callback in callbacks:
            callback.on_training_start(env.env_id, config, 0)
        steps, returns, clock = 0, [], Stopwatch()
        while steps < config.total_steps:
            # Each episode of the batch is cut so that together they stay within the step budget.
            budget = -(-(config.total_steps - steps) // num_envs)
            batch = run_episodes(
                policy, env, num_envs, seed=config.seed + len(returns), num_envs=num_envs, max_steps=budget
            )
            for episode in batch:
                steps += episode.length
                returns.append(episode.episode_return)
                run.log_scalars(
                    steps, {"charts/episodic_return": episode.episode_return, "charts/episodic_length": episode.length}
                )
            run.log_scalars(steps, {"charts/decisions_per_second": clock.rate(steps)})
            if should_stop([c.on_evaluation(steps, [e.episode_return for e in batch]) for c in callbacks]):
                break
        mean, ci = mean_ci95(returns)
        summary = {
            "agent": self.name,
            "env_id": env.env_id,
            "env_steps": steps,
            "episodes": len(returns),
            "mean_return": mean,
            "ci95": ci,
            "returns": returns,
            "steps_per_second": clock.rate(steps),
            **self.summary_extras(policy),
        }
        run.write_summary(summary)
        for callback in callbacks:
            callback.on_training_end(steps, summary)
        return summary


class InfoOnlyAgent(BaselineAgent):
    """A baseline that acts from ``info`` alone (legal actions, game state, history), never the observation text."""

    reads_observation_text = False


class OpenSpielAgent(InfoOnlyAgent):
    """A baseline that rebuilds the game from an OpenSpiel env's ``info``: any other env is refused in one line."""

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        if env_family(env.env_id) != "openspiel":
            raise UnsupportedEnvError(
                f"the {self.name} agent plays OpenSpiel envs only, not {env.env_id}; try --agent random"
            )
        return self.openspiel_policy(env)

    def openspiel_policy(self, env: EnvConfig) -> Policy:
        """The policy for an OpenSpiel env (``policy`` checked the family)."""
        raise NotImplementedError


Built = TypeVar("Built")


class OpenSpielPolicy:
    """What the OpenSpiel baselines' policies share: each env's state is rebuilt from ``info["game_string"]`` and
    ``info["history"]`` (a policy sees observations and infos, never the env), and what a policy builds per game (a
    bot, a solver, a best response) is built once, because building it loads or walks the game."""

    agent_name: ClassVar[str]
    """The agent named in the one-line refusal of an env whose info carries no game history."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self._per_game: dict[Any, Any] = {}

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        return [self.act_one(info) for info in infos]

    def act_one(self, info: Mapping[str, Any]) -> int:
        """The action for one env, from its ``info``."""
        raise NotImplementedError

    def game_history(self, info: Mapping[str, Any]) -> tuple[str, list[int]]:
        """``info``'s game string and move history; an env whose info has neither (not OpenSpiel) is refused."""
        if "game_string" not in info or "history" not in info:
            raise UnsupportedEnvError(
                f"the {self.agent_name} agent plays OpenSpiel envs only (their info carries the game history)"
            )
        return info["game_string"], info["history"]

    def per_game(self, key: Any, build: Callable[[], Built]) -> Built:
        """``build()`` for ``key`` (the game string, with the seat where what is built depends on it), built once."""
        if key not in self._per_game:
            self._per_game[key] = build()
        return self._per_game[key]


class RandomAgent(InfoOnlyAgent):
    name = "random"
    description = "Uniformly random legal actions (a floor for every env)."

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        return RandomPolicy(self.config.seed)


@dataclass(frozen=True, kw_only=True)
class ConstantConfig(AgentConfig):
    action: str = "NOOP"
    """The action pressed at every step, by name as the env lists it at reset (case-insensitive); where it is not
    legal at a step, the first legal action is taken."""


class ConstantAgent(InfoOnlyAgent):
    name = "constant"
    description = "One named action at every step (--set action=LEFT): the floor of a game one action can score in."
    Config = ConstantConfig

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        return ConstantPolicy(env, self.config.action)


@dataclass(frozen=True, kw_only=True)
class ScriptedConfig(AgentConfig):
    aim: Literal["ball", "landing"] = "ball"
    """``ball``: move towards where the ball is. ``landing`` (Breakout): towards where a falling ball will reach the
    paddle row, from its last two positions with the side walls reflecting it; over 32 evaluation games it scores
    48.7 with ``deadband=12`` against the ball tracker's 37.6 (docs/results/breakout_sft.md)."""
    deadband: int = 0
    """Stand still while the target is closer than this many px; 0: the game's default (Breakout: 8, half the
    paddle; Pong: within 4)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.deadband < 0:
            raise ValueError(f"deadband must be >= 0 px, got {self.deadband}")


class ScriptedAgent(InfoOnlyAgent):
    name = "scripted"
    description = "Hand-written ball tracker for Breakout and Pong (a ceiling for simple learners)."
    Config = ScriptedConfig

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        return ScriptedPolicy(env, self.config.aim, self.config.deadband)


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(RandomAgent)
    register(ConstantAgent)
    register(ScriptedAgent)
