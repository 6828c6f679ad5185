"""The ``ppo_lora`` agent: PPO on a causal LM with LoRA adapters (peft), with group-relative advantages (the default)
or a value head, acting in score mode (a categorical over the legal actions' likelihoods) or generate mode (sampled
answers, parsed).

Modules: ``config`` (the frozen config), ``model`` (LoRA, value head, split forward, reference), ``rollout``
(batched decisions), ``update`` (the PPO step), ``checkpoint`` (what --resume needs), ``policy`` (acting from a live model or a checkpoint), ``train`` (the loop), ``export`` (the ``llm-gym export``
command this plugin adds). Heavy imports wait for train/policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.ppo_lora import export
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.files import TRAINING_FILE
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import TaskSampler
from llm_gym.lm.agent_config import ADAPTER_SHAPE_FIELDS
from llm_gym.runs import Run


class PPOLoRAAgent(Agent):
    name = "ppo_lora"
    description = "PPO on a language model with LoRA: group-relative advantages (or a value head: advantage=gae), score or generate mode; the reference KL keeps it near the policy it started from."
    Config = PPOLoRAConfig
    fixed_on_resume = (*ADAPTER_SHAPE_FIELDS, "num_envs")

    config: PPOLoRAConfig

    def train(
        self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = (), sampler: TaskSampler | None = None
    ) -> dict[str, Any]:
        """See :meth:`llm_gym.Agent.train`; ``sampler`` (optional) picks each training episode's reset options."""
        from llm_gym.agents.ppo_lora.train import train  # transformers and peft: not for `llm-gym agents`

        return train(self.config, env, run, callbacks, agent=self.name, sampler=sampler)

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """Greedy actions of the adapter in ``checkpoint`` (merged into the base weights), or of the base model."""
        from llm_gym.agents.ppo_lora.policy import checkpoint_policy  # transformers and peft, as train

        return checkpoint_policy(self.config, env, checkpoint)

    def resume_only_files(self) -> tuple[str, ...]:
        """``training.pt``: the optimiser, scheduler, RNG states and counters."""
        return (TRAINING_FILE,)


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(PPOLoRAAgent)


@llm_gym.hookimpl
def register_commands(app) -> None:
    """``llm-gym export``: a checkpoint's adapter merged into the base model, or copied as is."""
    export.register(app)
