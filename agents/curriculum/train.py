"""The curriculum wrapper, top to bottom: build the base learner and the sampler, train the base with it while a
callback logs the stage, the success rate and the buffer, then add the stage history to ``summary.json``."""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from llm_gym.agent import Agent, EnvConfig
from llm_gym.agents.curriculum.config import PASSED_TO_BASE, CurriculumConfig
from llm_gym.agents.curriculum.report import print_stage_evaluation, stage_evaluation
from llm_gym.agents.curriculum.samplers import FailureReplay, StagedCurriculum
from llm_gym.agents.curriculum.stages import default_stage_tables, parse_stages
from llm_gym.callbacks import Callback
from llm_gym.config import apply_overrides
from llm_gym.envs.tasks import TaskSampler
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run


def base_agent(config: CurriculumConfig) -> Agent:
    """The wrapped learner with its own config (``base_config``; total_steps and seed from the curriculum)."""
    if config.base == "curriculum":
        raise ConfigError("the curriculum cannot wrap itself; set base to a learner, e.g. base=ppo_lora")
    cls = get_agent(config.base)
    settings = {**config.base_config, **{key: getattr(config, key) for key in PASSED_TO_BASE}}
    return cls(apply_overrides(cls.Config(), settings, source="base_config"))


def build_sampler(config: CurriculumConfig, env: EnvConfig) -> tuple[TaskSampler, StagedCurriculum]:
    """(what the learner draws from, the staged curriculum inside it)."""
    tables = list(config.stages) or default_stage_tables(env.env_id, env.kwargs)
    curriculum = StagedCurriculum(parse_stages(tables, env.env_id, env.kwargs, config.window), seed=config.seed)
    if config.replay_share <= 0:
        return curriculum, curriculum
    replay = FailureReplay(
        curriculum, capacity=config.buffer_size, replay_share=config.replay_share, seed=config.seed + 1
    )
    return replay, curriculum


class CurriculumLog(Callback):
    """Stamps stage changes with the env step and time, and logs the curriculum to TensorBoard after each update."""

    def __init__(self, run: Run, sampler: TaskSampler, curriculum: StagedCurriculum) -> None:
        self.run, self.sampler, self.curriculum = run, sampler, curriculum

    def stamp(self, step: int) -> None:
        # Stage changes happen inside the learner's rollout; the first update after one records where it stood. The
        # events live in the sampler's state, so the stamps go into the next checkpoint with it.
        for event in self.curriculum.events:
            if "env_step" not in event:
                event["env_step"] = step
                event["time"] = datetime.now(UTC).isoformat(timespec="seconds")

    def scalars(self) -> dict[str, float]:
        curriculum = self.curriculum
        out = {
            "curriculum/stage": float(curriculum.stage),
            f"curriculum/success_rate/{curriculum.current.name}": curriculum.success_rate,
            "curriculum/window_fill": len(curriculum.window) / curriculum.current.window,
        }
        if isinstance(self.sampler, FailureReplay):
            counts = self.sampler.counts
            out["curriculum/buffer_size"] = float(len(self.sampler))
            out["curriculum/replayed_share"] = counts["replayed"] / max(1, counts["replayed"] + counts["fresh"])
            out["curriculum/solved_from_buffer"] = float(counts["solved"])
        return out

    def on_training_start(self, env_id: str, config: Any, start_step: int) -> None:
        self.stamp(start_step)

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        self.stamp(step)
        self.run.log_scalars(step, self.scalars())
        return None


def train(config: CurriculumConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback]) -> dict[str, Any]:
    # -- setup: the learner and the sampler ---------------------------------------------------------------------
    base = base_agent(config)
    if "sampler" not in inspect.signature(base.train).parameters:
        raise ConfigError(
            f"agent {config.base!r} cannot train from a task sampler (its train() takes no sampler); "
            "use base=ppo_lora or base=nanogpt_ppo"
        )
    sampler, curriculum = build_sampler(config, env)
    log = CurriculumLog(run, sampler, curriculum)
    started = time.perf_counter()
    # -- train: the base learner's loop; it restores the sampler's state from its checkpoint on --resume ---------
    summary = dict(base.train(env, run, [log, *callbacks], sampler=sampler))
    # -- summary: the stage history -------------------------------------------------------------------------------
    log.stamp(int(summary.get("env_steps", 0)))
    summary["agent"] = "curriculum"
    summary["base"] = config.base
    summary["curriculum"] = {
        "stages": [
            {"name": s.name, "tasks": str(s.tasks), "options": dict(s.options), "threshold": s.threshold}
            for s in curriculum.stages
        ],
        "final_stage": curriculum.current.name,
        "final_success_rate": curriculum.success_rate,
        "episodes": curriculum.episodes,
        "events": [dict(e) for e in curriculum.events],
        "buffer_size": len(sampler) if isinstance(sampler, FailureReplay) else None,
        "replay_counts": dict(sampler.counts) if isinstance(sampler, FailureReplay) else None,
        "wall_seconds_this_session": time.perf_counter() - started,
    }
    # -- the curriculum's own before and after: both policies on the same held-out episodes of every stage -----------
    checkpoint = run.latest_checkpoint()
    if config.final_eval_episodes > 0 and checkpoint is not None:
        rows = stage_evaluation(base, env, curriculum.stages, config.final_eval_episodes, checkpoint)
        summary["curriculum"]["stage_evaluation"] = rows
        print_stage_evaluation(rows)
    run.write_summary(summary)
    return summary
