"""The ``curriculum`` config: which learner it wraps, the stages and the failure buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from llm_gym.agent import AgentConfig
from llm_gym.agents.curriculum.stages import parse_stages
from llm_gym.config import nested_agent_config, training_only

PASSED_TO_BASE = ("total_steps", "seed")
"""The curriculum's own fields it hands to the base learner, overriding the same keys of ``base_config``."""


@dataclass(frozen=True, kw_only=True)
class CurriculumConfig(AgentConfig):
    first_fields: ClassVar[tuple[str, ...]] = ("total_steps", "seed", "base", "base_config", "stages", "window",
        "buffer_size", "replay_share", "final_eval_episodes")  # fmt: skip
    """The fields `llm-gym agents` shows first."""
    total_steps: int = training_only(20_000)
    """Environment steps to train for, summed over parallel envs (passed to the base learner)."""
    base: str = "ppo_lora"
    """The learner plugin that trains (any agent whose train() takes a task sampler: ppo_lora, nanogpt_ppo, ...)."""
    base_config: dict[str, Any] = nested_agent_config("base")
    """The base learner's own settings (a base_config table in the TOML file, or --set base_config='{"num_envs": 4}',
    which changes the keys it names); its total_steps and seed come from this config. Each key affects what the base
    learner's field of that name affects (see llm-gym agents BASE)."""
    stages: tuple[dict[str, Any], ...] = training_only(())
    """One TOML table per stage (an array of tables named stages): name, tasks ("first-last"), threshold, optional
    window / demote_below, and the env's reset options (OpenSpiel: opponent, mcts, seat; Trace: level). Empty: the
    seed's three OpenSpiel stages (docs/guides/curriculum.md)."""
    window: int = training_only(100)
    """Recent episodes of a stage its success rate is measured over (a stage's own window wins)."""
    buffer_size: int = training_only(1000)
    """Failed tasks kept for replay (the least urgent goes when it is full)."""
    replay_share: float = training_only(0.3)
    """Share of episodes replayed from the failure buffer (priority 1 - score); 0 turns replay off."""
    final_eval_episodes: int = training_only(0)
    """After training, play the untrained and the trained policy greedily on this many held-out episodes of every
    stage (seeds 100,000,000 on; the same task ids for both): the curriculum's own before and after, which the base
    learner's evaluations (they follow the current stage) do not give. 0: none."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # The curriculum hands its own total_steps and seed to the base learner; the same keys in base_config would
        # be overridden without a word, so they are refused and the user is told which setting counts.
        for key in PASSED_TO_BASE:
            if key in self.base_config:
                raise ValueError(
                    f"base_config.{key} would be ignored: the curriculum passes its own {key} to the base learner; "
                    f"set {key} on the curriculum instead (--set {key}={self.base_config[key]})"
                )
        if self.window < 1:
            raise ValueError(f"window must be at least 1 episode, got {self.window}")
        if self.buffer_size < 1:
            raise ValueError(f"buffer_size must be at least 1, got {self.buffer_size}")
        if not 0.0 <= self.replay_share <= 1.0:
            raise ValueError(f"replay_share must lie in [0, 1], got {self.replay_share}")
        if self.stages:  # checked here, so a bad stage file fails before a run directory is made
            parse_stages(self.stages, None, {}, self.window)
