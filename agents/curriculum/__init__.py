"""The ``curriculum`` agent: any learner plugin, fed by a staged curriculum with a failure-replay buffer.

It trains nothing itself. It builds a :class:`~llm_gym.agents.curriculum.samplers.StagedCurriculum` (behind a
:class:`~llm_gym.agents.curriculum.samplers.FailureReplay` buffer) from the stages in its config, and hands it to the base learner's
``train(..., sampler=...)``: the learner's stepping path resets every finished env with the sampler's next options
and reports each episode back, and keeps the sampler's state in every checkpoint, so ``--resume`` continues with
the same stage, window and buffer. Modules: ``config``, ``stages`` (stage tables, checked), ``train`` (the wrapper).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_gym
from llm_gym.agent import Agent, EnvConfig, Policy
from llm_gym.agents.curriculum.config import CurriculumConfig
from llm_gym.agents.curriculum.train import base_agent, train
from llm_gym.callbacks import Callback
from llm_gym.runs import Run


class CurriculumAgent(Agent):
    name = "curriculum"
    description = "Wraps any learner (base=ppo_lora, nanogpt_ppo, ...) with stages that advance at a success threshold and a failure-replay buffer."
    Config = CurriculumConfig
    # Its checkpoints are the base learner's: the fields of base_config they hold are that learner's fixed_on_resume.
    fixed_on_resume = ("base",)

    config: CurriculumConfig

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        return train(self.config, env, run, callbacks)

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """The base learner's policy (the checkpoints are the base learner's own)."""
        return base_agent(self.config).policy(env, checkpoint)

    def resume_only_files(self) -> tuple[str, ...]:
        """The base learner's (the sampler's state is in the shared ``tasks.json``)."""
        return base_agent(self.config).resume_only_files()


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(CurriculumAgent)
