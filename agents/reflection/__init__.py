"""The ``reflection`` agent: trial -> the model reflects on its poor steps and proposes corrected actions -> the
corrections are verified by replaying them from env snapshots -> fine-tune (LoRA or full) on the kept ones -> next
iteration. Text LMs on text envs, image+text models (SmolVLM) on the vision envs.

Modules: ``config``, ``prompts`` (the reflection prompt and its JSON answer format), ``credit`` (which steps are
poor), ``trial``, ``verify``, ``finetune`` (answer-only loss), ``model``, ``plot``, ``train`` (the loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.callbacks import Callback
from llm_gym.runs import Run


class ReflectionAgent(Agent):
    name = "reflection"
    description = (
        "Trial, reflect on poor steps, verify the corrections by replay, fine-tune (LoRA or full); text LMs and VLMs."
    )
    Config = ReflectionConfig
    fixed_on_resume = ("model", "finetune", "lora_rank", "lora_alpha")

    config: ReflectionConfig

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        from llm_gym.agents.reflection.train import train  # transformers and peft: not for `llm-gym agents`

        return train(self.config, env, run, callbacks, agent=self.name)

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """Greedy actions of the model after the checkpoint's iteration (LoRA merged), or of the base model; with
        the earlier turns its run trained with (``history=K``) unless ``env`` gives its own."""
        from llm_gym.agents.reflection.model import checkpoint_policy  # torch, transformers and peft, as train

        return checkpoint_policy(self.config, env, Path(checkpoint) if checkpoint else None)


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(ReflectionAgent)
