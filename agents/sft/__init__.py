"""The ``sft`` agent: LoRA fine-tuning on demonstrations (``llm-gym demos``), with the loss on the answer tokens
only, a held-out split of the demo episodes for a validation loss, and greedy evaluations on ``ppo_lora``'s
held-out seeds before, during and after training.

Its model, evaluation, checkpoints and policy are ``ppo_lora``'s (:meth:`SFTConfig.as_ppo_lora`): a checkpoint holds
``adapter/`` (plain peft loads it) and ``value_head.pt``, ``llm-gym play --checkpoint`` plays it like a ppo_lora
one, and ``ppo_lora --set init_adapter=CHECKPOINT`` continues from it with PPO.

Modules: ``config`` (the frozen config), ``data`` (demos -> answer-only examples, the episode split), ``frozen_cache``
(the frozen layers' output of the demos on disk, for resumes), ``train``
(the loop), ``report`` (the before/after table and plot). Heavy imports wait for train/policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.callbacks import Callback
from llm_gym.lm.agent_config import ADAPTER_SHAPE_FIELDS
from llm_gym.runs import Run


class SFTAgent(Agent):
    name = "sft"
    description = "LoRA fine-tuning on demonstrations (answer tokens only); checkpoints that ppo_lora continues from."
    Config = SFTConfig
    fixed_on_resume = (*ADAPTER_SHAPE_FIELDS, "demos")

    config: SFTConfig

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        from llm_gym.agents.sft.train import train  # transformers and peft: not for `llm-gym agents`

        return train(self.config, env, run, callbacks, agent=self.name)

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """Greedy actions of the adapter in ``checkpoint`` (merged into the base weights), or of the base model."""
        from llm_gym.agents.ppo_lora.policy import checkpoint_policy  # transformers and peft, as train

        return checkpoint_policy(self.config.as_ppo_lora(), env, checkpoint)

    def resume_only_files(self) -> tuple[str, ...]:
        """``sft_training.pt``: the optimiser, scheduler, RNG states and the epoch's position."""
        from llm_gym.agents.sft.train import STATE_FILE  # beside the loop (transformers)

        return (STATE_FILE,)


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(SFTAgent)
