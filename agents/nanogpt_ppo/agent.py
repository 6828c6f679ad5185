"""The ``nanogpt_ppo`` agent: a small GPT trained from scratch with PPO on text (ASCII) observations.

The plugin module the CLI loads on every run (``llm-gym agents`` lists it): torch waits for train and policy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.files import TRAINING_FILE
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import TaskSampler
from llm_gym.runs import Run


class NanoGPTPPOAgent(Agent):
    name = "nanogpt_ppo"
    description = "A small GPT over the observation's characters, trained from scratch with PPO (fast on a CPU)."
    Config = NanoGPTPPOConfig
    fixed_on_resume = ("preset", "grid_rows", "grid_cols", "context", "n_layer", "n_head", "n_embd", "mlp_ratio",
                       "positions", "query_summary", "key_frequency_bias", "num_envs")  # fmt: skip

    config: NanoGPTPPOConfig

    def train(
        self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = (), sampler: TaskSampler | None = None
    ) -> dict[str, Any]:
        """See :meth:`llm_gym.Agent.train`; ``sampler`` (optional) picks each training episode's reset options."""
        from llm_gym.agents.nanogpt_ppo.train import train  # the loop pulls in rich and the vector envs

        return train(self.config, env, run, callbacks, agent=self.name, sampler=sampler)

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """Greedy actions of the network in ``checkpoint`` (``checkpoints/step_N`` or ``checkpoints/best``), or of
        a freshly initialised one. The policy carries the env arguments it was trained with (``env_kwargs``)."""
        from llm_gym.agents.nanogpt_ppo.policy import checkpoint_policy  # torch: not for `llm-gym agents`

        return checkpoint_policy(self.config, env, checkpoint)

    def resume_only_files(self) -> tuple[str, ...]:
        """``training.pt``: the optimiser, RNG states, counters and rollout buffer position."""
        return (TRAINING_FILE,)


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(NanoGPTPPOAgent)
