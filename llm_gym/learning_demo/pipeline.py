"""The learning demo from start to end, in one process: record demonstrations on training seeds, fine-tune the
model on them with ``sft`` (which evaluates the untrained and the trained adapter greedily on held-out seeds, the
model loaded once), play the reference policies (uniform random, the demonstrator) on the same held-out seeds, and
collect everything with the wall time of each phase.

Agents are looked up in the plugin registry by name (the core never imports ``llm_gym.agents``), so the demo runs
whatever ``sft`` and the demonstrator are in the installed plugins.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig
from llm_gym.atomic import write_json_atomic
from llm_gym.callbacks import Callback
from llm_gym.config import to_dict
from llm_gym.demos.record import record_demos
from llm_gym.learning_demo.agreement import (
    Agreement,
    Positions,
    agreement,
    demonstrator_positions,
    positions_as_dicts,
    unreached_positions,
)
from llm_gym.learning_demo.config import LearningDemoConfig
from llm_gym.plugins import get_agent
from llm_gym.runs import Run, default_run_name
from llm_gym.stats import mean_ci95, wilson_ci95
from llm_gym.training.loop import play_evaluation

EXPLORER_GAMES = 4
"""The uniformly random player plays this many times the evaluation's games to find the positions the demonstrator
never reaches (in Kuhn poker the rarest, a first-seat card facing a bet after its own pass, comes up in 1 of 24 games:
400 games miss it with probability 4e-8)."""

RESULT_FILE = "learning_demo.json"
"""Written into the sft run directory: the settings, every evaluation's returns and scores, and the timings."""

Log = Callable[[str], None]


@dataclass
class Arm:
    """One policy's greedy evaluation on the held-out seeds."""

    label: str
    returns: list[float]
    scores: list[float]

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def wins(self) -> int:
        """Games won: score above 0.5 (``info["success"]``; a draw scores 0.5 and is no win)."""
        return sum(1 for score in self.scores if score > 0.5)

    def win_rate(self) -> tuple[float, float, float]:
        """(share of games won, Wilson 95% low, high)."""
        low, high = wilson_ci95(self.wins, self.n)
        return self.wins / max(self.n, 1), low, high

    def mean_return(self) -> tuple[float, float]:
        """(mean return, half-width of its 95% t interval)."""
        return mean_ci95(self.returns)

    def as_dict(self) -> dict[str, Any]:
        rate, low, high = self.win_rate()
        mean, half = self.mean_return()
        return {"label": self.label, "n": self.n, "wins": self.wins, "win_rate": rate, "win_rate_ci95": [low, high],
                "mean_return": mean, "mean_return_ci95": half, "returns": self.returns, "scores": self.scores}  # fmt: skip


class BeforeAfter:
    """What every demo's result reports the same way (the sft and the RL demo): its wall time, summed over its
    phases, and whether learning is shown. A base for dataclasses that have these fields."""

    phases: dict[str, float]
    before: Arm
    after: Arm

    @property
    def wall_seconds(self) -> float:
        return sum(self.phases.values())

    def learning_shown(self) -> bool:
        """True when the trained model's win-rate interval lies wholly above the untrained one's."""
        return self.after.win_rate()[1] > self.before.win_rate()[2]


@dataclass
class LearningDemoResult(BeforeAfter):
    """What the demo measured."""

    config: LearningDemoConfig
    run_path: Path
    demos_path: Path
    demo_decisions: int
    before: Arm
    after: Arm
    references: list[Arm]
    phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase, in order."""
    checkpoint: str | None = None
    plot: Path | None = None
    positions: Positions | None = None
    """The distinct positions of the demonstrator's held-out games (``config.agreement``)."""
    agreements: list[Agreement] = field(default_factory=list)
    """Before and after: the model's greedy answer in each of those positions."""
    unreached: Positions | None = None
    """Positions the random player meets that the demonstrator never does: in no demonstration."""
    unreached_agreements: list[Agreement] = field(default_factory=list)
    """Before and after: the model's greedy answer in each of those."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": to_dict(self.config),
            "run": str(self.run_path),
            "demos": str(self.demos_path),
            "demo_decisions": self.demo_decisions,
            "demo_seeds": [self.config.demo_seeds.start, self.config.demo_seeds.stop - 1],
            "eval_seeds": [self.config.eval_seeds.start, self.config.eval_seeds.stop - 1],
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "references": [arm.as_dict() for arm in self.references],
            "learning_shown": self.learning_shown(),
            "phases_s": self.phases,
            "wall_s": self.wall_seconds,
            "checkpoint": self.checkpoint,
            "plot": str(self.plot) if self.plot else None,
            "positions": positions_as_dicts(self.positions) if self.positions is not None else None,
            "agreement": [a.as_dict() for a in self.agreements],
            "unreached_positions": positions_as_dicts(self.unreached) if self.unreached is not None else None,
            "unreached_agreement": [a.as_dict() for a in self.unreached_agreements],
        }


class _PhaseClock(Callback):
    """Splits sft's wall time into model load, evaluation before, training and evaluation after, and says each.

    sft calls the hooks in this order: start, evaluation (before), then per epoch an update and, after the last
    epoch, the second evaluation; the training phase ends at the last update."""

    def __init__(self, log: Log) -> None:
        self.log, self.phases = log, {}
        self._last = time.perf_counter()
        self._evaluations = 0

    def _lap(self, phase: str) -> float:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._last
        self._last = now
        return self.phases[phase]

    def on_training_start(self, env_id: str, config: Any, start_step: int) -> None:
        seconds = self._lap("load model, encode demos")
        self.log(f"model loaded and demonstrations encoded ({seconds:.0f} s); evaluating the untrained model")

    def on_update(self, step: int, metrics: Mapping[str, float]) -> bool | None:
        seconds = self._lap("train")
        loss, prob = metrics.get("val/answer_loss"), metrics.get("val/answer_prob")
        shown = f"; validation answer loss {loss:.3f}, demo answer probability {prob:.2f}" if loss is not None else ""
        epoch = int(metrics.get("charts/epoch", 0))
        self.log(f"epoch {epoch} done ({step} demo decisions, {seconds:.0f} s of training){shown}")
        return None

    def on_evaluation(self, step: int, returns: Sequence[float]) -> bool | None:
        self._evaluations += 1
        phase = "evaluate before" if self._evaluations == 1 else "evaluate after"
        seconds = self._lap(phase)
        self.log(f"{phase.split()[1]}: mean return {mean_ci95(list(returns))[0]:+.2f} ({seconds:.0f} s)")
        return None


def sft_settings(config: LearningDemoConfig, demos: Path) -> dict[str, Any]:
    """The ``sft`` config fields the demo sets (the rest keep sft's defaults)."""
    return {
        "model": config.model,
        "demos": str(demos),
        "seed": config.seed,
        "dtype": config.dtype,
        "threads": config.threads,
        "trainable_layers": config.trainable_layers,
        "epochs": config.epochs,
        "minibatch_size": config.batch_size,
        "learning_rate": config.learning_rate,
        "choice_loss_coef": config.choice_loss_coef,
        "choice_target": config.choice_target,
        "eval_episodes": config.eval_episodes,
        "eval_every": 0,  # only before and after: each evaluation costs as much as the training
        "eval_max_steps": 0,
        "progress": False,  # the demo prints its own lines and table
    }


def run_learning_demo(
    config: LearningDemoConfig, runs_root: str | Path = "runs/demo", log: Log = print
) -> LearningDemoResult:
    """Record, train, evaluate and return the result (``save_result`` writes it into the run directory)."""
    env = EnvConfig(config.env_id)
    sft = get_agent("sft")
    demonstrator = get_agent(config.demonstrator)()
    phases: dict[str, float] = {}

    start = time.perf_counter()
    run_path = Path(runs_root) / default_run_name(config.env_id, "sft", config.seed)
    demos_path = run_path / "demos.jsonl"
    sft_config = sft.Config(**sft_settings(config, demos_path))
    run = Run.create(config.env_id, "sft", to_dict(sft_config), path=run_path)
    try:
        seeds = config.demo_seeds
        log(f"recording {config.demo_episodes} games of {config.demonstrator} on seeds {seeds.start}-{seeds.stop - 1}")
        demos = record_demos(
            demonstrator.policy(env), env, config.demo_episodes, demos_path, seed=config.demo_seed, num_envs=8,
            source={"agent": config.demonstrator, "config": to_dict(demonstrator.config), "checkpoint": None,
                    "explore": config.demo_explore},
            explore=config.demo_explore,
        )  # fmt: skip
        phases["record demonstrations"] = time.perf_counter() - start
        log(f"{demos.decisions} decisions -> {demos_path}; loading {config.model}")

        clock = _PhaseClock(log)
        summary = sft(sft_config).train(env, run, callbacks=[clock])
        phases |= clock.phases
    finally:
        run.close()
    evaluations = summary["evaluations"]
    before = Arm("before: untrained model", evaluations[0]["returns"], evaluations[0]["scores"])
    epochs = int(summary["epochs"])
    after = Arm(
        f"after: sft, {epochs} epoch{'s' if epochs != 1 else ''}", evaluations[-1]["returns"], evaluations[-1]["scores"]
    )

    start = time.perf_counter()
    references = [
        _play(get_agent("random")(), "random (reference)", env, config),
        _play(demonstrator, f"{config.demonstrator} (demonstrator)", env, config),
    ]
    phases["reference rows"] = time.perf_counter() - start
    result = LearningDemoResult(
        config, run_path, demos_path, demos.decisions, before, after, references, phases,
        checkpoint=summary.get("checkpoint"),  # the last epoch's: the adapter "after" evaluated
    )  # fmt: skip
    if config.agreement:
        start = time.perf_counter()
        _agreements(sft(sft_config), demonstrator, env, config, result)
        phases["agreement per position"] = time.perf_counter() - start
        agreed = result.agreements[-1]
        log(f"after: the demonstrator's answer in {agreed.agreed_positions} of its {len(result.positions)} positions")
    return result


def held_out_positions(demonstrator: Any, env: EnvConfig, config: LearningDemoConfig) -> tuple[Positions, Positions]:
    """The demonstrator's positions in the held-out games, and those only random play reaches on the same seeds
    (``EXPLORER_GAMES`` times as many games), each with the demonstrator's answer."""
    start = config.eval_seeds.start
    reached = demonstrator_positions(demonstrator, env, config.eval_episodes, start)
    explorer = get_agent("random")().policy(env)
    games = EXPLORER_GAMES * config.eval_episodes
    return reached, unreached_positions(demonstrator, explorer, env, games, start, reached)


def _agreements(
    sft: Any, demonstrator: Any, env: EnvConfig, config: LearningDemoConfig, result: LearningDemoResult
) -> None:
    """The demonstrator's positions in the held-out games and those only random play reaches there, and the model's
    answers in both before and after training (each policy loaded in turn: the untrained model, then the checkpoint
    merged, as ``llm-gym play`` loads it); stored in ``result``."""
    result.positions, result.unreached = held_out_positions(demonstrator.policy(env), env, config)
    models = [(result.before.label, None)]
    if result.checkpoint:  # else no checkpoint was written: nothing to ask after training
        models.append((result.after.label, Path(result.checkpoint)))
    for label, checkpoint in models:
        policy = sft.policy(env, checkpoint)
        result.agreements.append(agreement(policy, label, result.positions))
        result.unreached_agreements.append(agreement(policy, label, result.unreached))


def _play(agent: Any, label: str, env: EnvConfig, config: LearningDemoConfig) -> Arm:
    returns, scores = play_evaluation(agent.policy(env), env, config.eval_episodes, config.eval_seeds.start, 0)
    return Arm(label, returns, scores)


def save_result(result: LearningDemoResult) -> Path:
    """Write ``learning_demo.json`` into the run directory; returns its path."""
    path = result.run_path / RESULT_FILE
    write_json_atomic(path, result.as_dict())
    return path
