"""The RL demo behind ``make demo``: the default model learns Kuhn poker by reinforcement learning, from no
demonstrations. ``ppo_lora`` with a preset recipe (groups of games dealt from one seed, ``advantage=group``) trains
the model; the untrained and the trained model play the same held-out games greedily, and each is also evaluated
exactly (every deal and every move of the random opponent: ``llm_gym.training.exact``); the random player and the exact best
response are the reference rows. One process, the model loaded for each policy as ``llm-gym play`` loads it.

Agents are looked up in the plugin registry by name (the core never imports ``llm_gym.agents``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy
from llm_gym.atomic import write_json_atomic
from llm_gym.bench.machine import timing_machine
from llm_gym.callbacks import Callback
from llm_gym.config import apply_overrides, to_dict
from llm_gym.learning_demo.pipeline import Arm, BeforeAfter, Log
from llm_gym.plugins import get_agent
from llm_gym.runs import Run, default_run_name
from llm_gym.training.evaluation import HELDOUT_SEED
from llm_gym.training.exact import ExactResult, evaluate_exact
from llm_gym.training.loop import play_evaluation

RESULT_FILE = "rl_demo.json"
"""Written into the run directory: the settings, every game's return and score, the exact values, the timings."""


@dataclass(frozen=True, kw_only=True)
class RLDemoConfig:
    """What the RL demo trains and evaluates."""

    env_id: str = "OpenSpiel-kuhn_poker-v0"
    """The env: a small OpenSpiel game against its default (uniformly random) opponent, so it has exact values."""
    preset: str = "kuhn-poker-demo"
    """The ``ppo_lora`` preset the model trains with (``llm-gym agents ppo_lora`` lists them): by default the
    leaderboard's ``kuhn-poker`` recipe in half its env steps at a constant learning rate, which fits 10 minutes of a
    2-core CPU in float32."""
    model: str = "smollm2-135m"
    """The language model trained (the default is the one ``make install`` puts in)."""
    seed: int = 0
    """ppo_lora's seed: training group ``j`` is dealt with seed ``seed + j``; the evaluation's games are held out."""
    total_steps: int = 0
    """Env steps to train for; 0: the preset's."""
    eval_episodes: int = 100
    """Games played greedily before and after training (and by each reference), the same held-out seeds for each."""
    threads: int = 0
    """Torch CPU threads (0: the runtime's default)."""
    dtype: str = "auto"
    """Model dtype (auto: bfloat16 on a CPU with AMX or AVX512-BF16, else float32)."""

    def __post_init__(self) -> None:
        if self.eval_episodes < 1 or self.total_steps < 0 or self.seed < 0:
            raise ValueError("eval_episodes must be >= 1, and total_steps and seed >= 0")

    @property
    def eval_seeds(self) -> range:
        """The held-out games: the bench's evaluation split (seeds from 100,000,000), far from training's seeds."""
        return range(HELDOUT_SEED + self.seed, HELDOUT_SEED + self.seed + self.eval_episodes)


@dataclass
class ScoredArm(Arm):
    """A policy's greedy games on the held-out seeds and its exact evaluation."""

    exact: ExactResult | None = None

    def as_dict(self) -> dict[str, Any]:
        return super().as_dict() | {"exact": self.exact.as_dict() if self.exact else None}


@dataclass
class RLDemoResult(BeforeAfter):
    """What the RL demo measured."""

    config: RLDemoConfig
    ppo_config: dict[str, Any]
    run_path: Path
    before: ScoredArm
    after: ScoredArm
    references: list[ScoredArm]
    env_steps: int
    curve: list[tuple[int, float, float, float]] = field(default_factory=list)
    """(env step, exact expected return, win probability, loss probability) of the greedy policy during training."""
    phases: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    plot: Path | None = None
    machine: dict[str, Any] = field(default_factory=dict)
    """Where it ran (:func:`llm_gym.bench.machine.timing_machine`): the demo's timings and its float32 or bfloat16 numbers depend on the CPU."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": to_dict(self.config),
            "ppo_lora": self.ppo_config,
            "run": str(self.run_path),
            "eval_seeds": [self.config.eval_seeds.start, self.config.eval_seeds.stop - 1],
            "env_steps": self.env_steps,
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "references": [arm.as_dict() for arm in self.references],
            "curve": self.curve,
            "learning_shown": self.learning_shown(),
            "phases_s": self.phases,
            "wall_s": self.wall_seconds,
            "machine": self.machine,
            "checkpoint": self.checkpoint,
            "plot": str(self.plot) if self.plot else None,
        }


class _TrainingClock(Callback):
    """Says where training stands at each quarter of it: env steps, the training games' mean return, minutes."""

    def __init__(self, log: Log, total: int) -> None:
        self.log, self.total, self.started, self.next = log, total, time.perf_counter(), total // 4

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        if step >= self.next:
            self.next += self.total // 4
            played = metrics.get("charts/episodic_return")
            shown = f", training games' mean return {played:+.2f}" if played is not None else ""
            self.log(f"  {step}/{self.total} env steps{shown} ({(time.perf_counter() - self.started) / 60:.1f} min)")
        return None


def ppo_settings(config: RLDemoConfig) -> dict[str, Any]:
    """The ``ppo_lora`` config fields: the preset's, then the demo's own."""
    agent = get_agent("ppo_lora")
    preset = agent.presets()[config.preset]
    settings = dict(preset.config)
    settings |= {"model": config.model, "seed": config.seed, "dtype": config.dtype, "threads": config.threads,
                 "eval_episodes": 0, "eval_exact": True, "progress": False, "video": False}  # fmt: skip
    if config.total_steps:
        settings["total_steps"] = config.total_steps
    return to_dict(apply_overrides(agent.Config(), settings))


def run_rl_demo(config: RLDemoConfig, runs_root: str | Path = "runs/demo", log: Log = print) -> RLDemoResult:
    """Evaluate the untrained model, train it, evaluate it again and the references; returns the result."""
    env = EnvConfig(config.env_id)
    agent_cls = get_agent("ppo_lora")
    settings = ppo_settings(config)
    ppo_config = apply_overrides(agent_cls.Config(), settings)
    phases: dict[str, float] = {}
    load_before = os.getloadavg()[0]

    start = time.perf_counter()
    log(f"loading {config.model}; the untrained model plays {config.eval_episodes} held-out games")
    before = _score("untrained model", agent_cls(ppo_config).policy(env), env, config)
    phases["evaluate before"] = time.perf_counter() - start
    log(
        f"  won {before.wins}/{before.n}, exact expected return {before.exact.expected_return:+.3f} ({phases['evaluate before']:.0f} s)"
    )  # type: ignore[union-attr]

    start = time.perf_counter()
    run_path = Path(runs_root) / default_run_name(config.env_id, "ppo_lora", config.seed)
    run = Run.create(config.env_id, "ppo_lora", settings, path=run_path)
    log(
        f"training ppo_lora (preset {config.preset}: {settings['advantage']} advantages, {settings['total_steps']} env steps) -> {run_path}"
    )
    try:
        summary = agent_cls(ppo_config).train(env, run, callbacks=[_TrainingClock(log, settings["total_steps"])])
    finally:
        run.close()
    phases["train"] = time.perf_counter() - start

    start = time.perf_counter()
    checkpoint = summary.get("checkpoint")
    after = _score(
        f"trained, {summary['env_steps']} env steps", agent_cls(ppo_config).policy(env, Path(checkpoint)), env,
        config,
    )  # fmt: skip
    phases["evaluate after"] = time.perf_counter() - start
    log(
        f"  won {after.wins}/{after.n}, exact expected return {after.exact.expected_return:+.3f} ({phases['evaluate after']:.0f} s)"
    )  # type: ignore[union-attr]

    start = time.perf_counter()
    references = [
        _score("random (reference)", get_agent("random")().policy(env), env, config),
        _score("best response (reference)", get_agent("best_response")().policy(env), env, config),
    ]
    phases["reference rows"] = time.perf_counter() - start
    return RLDemoResult(
        config, settings, run_path, before, after, references, int(summary["env_steps"]),
        curve=[tuple(row) for row in summary.get("exact_eval_history") or ()], phases=phases, checkpoint=checkpoint,
        machine=timing_machine(load_before),
    )  # fmt: skip


def _score(label: str, policy: Policy, env: EnvConfig, config: RLDemoConfig) -> ScoredArm:
    returns, scores = play_evaluation(policy, env, config.eval_episodes, config.eval_seeds.start, 0)
    return ScoredArm(label, returns, scores, exact=evaluate_exact(policy, env))


def save_rl_result(result: RLDemoResult) -> Path:
    """Write ``rl_demo.json`` into the run directory; returns its path."""
    path = result.run_path / RESULT_FILE
    write_json_atomic(path, result.as_dict())
    return path
