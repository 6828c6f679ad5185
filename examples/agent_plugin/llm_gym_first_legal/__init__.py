"""An llm-gym agent plugin skeleton: a config (a frozen dataclass, a docstring under each field), a policy acting on
a batch, an agent that trains into a run directory and loads its policy back, and the hook that registers it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym import Agent, AgentConfig, EnvConfig, Policy, Run, run_episodes
from llm_gym.callbacks import Callback


@dataclass(frozen=True, kw_only=True)
class FirstLegalConfig(AgentConfig):
    pick: int = 0
    """Which legal action to press, by its place in the legal list (0: the first; past the end: the last)."""


class FirstLegalPolicy:
    def __init__(self, pick: int) -> None:
        self.pick = pick

    def act(self, observations: Sequence[Any], infos: Sequence[dict[str, Any]]) -> list[int]:
        return [int(info["legal_actions"][min(self.pick, len(info["legal_actions"]) - 1)]) for info in infos]


class FirstLegalAgent(Agent):
    name = "first_legal"
    description = "The same legal action every step (an example plugin)."
    Config = FirstLegalConfig

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        # A real agent learns here; this one plays, logs its returns and saves a checkpoint.
        results = run_episodes(self.policy(env), env, episodes=4, seed=self.config.seed)
        returns = [r.episode_return for r in results]
        run.log_scalars(0, {"eval/mean_return": sum(returns) / len(returns)})
        with run.checkpoint(step=sum(r.length for r in results)) as directory:
            (directory / "pick.txt").write_text(str(self.config.pick))
        return {"mean_return": sum(returns) / len(returns)}

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        pick = int((checkpoint / "pick.txt").read_text()) if checkpoint else self.config.pick
        return FirstLegalPolicy(pick)


@llm_gym.hookimpl
def register_agents(register: Any) -> None:
    register(FirstLegalAgent)
