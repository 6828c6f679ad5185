"""Training plumbing every learning agent shares, as plain functions (no Trainer base class): the step counters a
checkpoint carries, the progress bar, "evaluate -> keep the best -> callbacks" and "checkpoint -> prune ->
callbacks", and the summary at the end. Each agent's loop stays one readable file that calls these in order, and
the same callbacks fire in the same places in every agent.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from rich import get_console
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

from llm_gym.agent import EnvConfig, Policy
from llm_gym.callbacks import Callback, should_stop
from llm_gym.envs.catalog import evaluation_overrides, training_defaults
from llm_gym.envs.state_codec import StateCodecError, dumps, loads
from llm_gym.envs.tasks import TaskSampler, UniformTaskSampler
from llm_gym.errors import CheckpointError, ConfigError
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.stepping import EnvStepper
from llm_gym.training.evaluation import run_episodes

BEST = "best"
"""The checkpoint name of the best evaluation so far (``checkpoints/best``)."""
ENVS_FILE, TASKS_FILE = "envs.json", "tasks.json"
"""In a checkpoint: the stepper's state (:mod:`llm_gym.envs.state_codec`: data, not code), and a task sampler's state."""
LEGACY_ENVS_FILE = "envs.pkl"
"""What checkpoints held before: a pickle, loaded only with ``LLM_GYM_TRUST_PICKLE=1`` (unpickling runs code)."""
TRUST_PICKLE_VARIABLE = "LLM_GYM_TRUST_PICKLE"

C = TypeVar("C", bound="Counters")


@dataclass
class Counters:
    """Progress of a run; saved in every checkpoint and reported in the summary. Agents subclass it for more."""

    global_step: int = 0
    """Env steps so far, summed over envs."""
    update: int = 0
    """Updates done."""
    episodes: int = 0
    """Training episodes finished."""
    best_eval_return: float = float("-inf")
    """The best mean return of an evaluation so far."""
    eval_history: list[tuple[int, float, float]] = field(default_factory=list)
    """(env step, mean greedy evaluation return, mean game score) of every evaluation."""
    train_history: list[tuple[int, float, float, int]] = field(default_factory=list)
    """(env step, mean return, mean raw game return, episodes) of the training episodes that ended in a rollout."""
    wall_seconds: float = 0.0
    """Wall-clock seconds of training, summed over resumes."""
    cpu_seconds: float = 0.0
    """CPU seconds of the training process (all its threads), summed over resumes."""

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state_dict(cls: type[C], state: Mapping[str, Any]) -> C:
        """Counters saved by :meth:`state_dict` (lists of pairs become tuples again; unknown keys are dropped)."""
        names = {f.name for f in fields(cls)}
        values = {k: [tuple(e) for e in v] if k.endswith("_history") else v for k, v in state.items() if k in names}
        return cls(**values)


def recent_train_mean(history: list[tuple[int, float, float, int]], column: int, last: int = 5) -> float | None:
    """Mean of one column of ``train_history`` (1: return, 2: raw game return) over the last ``last`` rollouts that
    finished episodes, weighted by their episode counts; None before any episode has finished."""
    recent = history[-last:]
    if not recent:
        return None
    total = sum(entry[3] for entry in recent)
    return sum(entry[column] * entry[3] for entry in recent) / total


class Clock:
    """Wall and CPU seconds that continue from a resumed run's totals."""

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self._wall = time.perf_counter() - counters.wall_seconds
        self._cpu = time.process_time() - counters.cpu_seconds

    def tick(self) -> None:
        """Bring ``wall_seconds`` and ``cpu_seconds`` of the counters up to now."""
        self.counters.wall_seconds = time.perf_counter() - self._wall
        self.counters.cpu_seconds = time.process_time() - self._cpu


def save_envs(directory: Path, env_state: Mapping[str, Any]) -> None:
    """Write :meth:`llm_gym.stepping.EnvStepper.state_dict` into a checkpoint: ``envs.json``, and the task
    sampler's state apart in ``tasks.json`` (``{"sampler": ...}``) where there is one."""
    state = dict(env_state)
    sampler = state.pop("sampler", None)
    (directory / ENVS_FILE).write_text(dumps(state))
    if sampler is not None:
        (directory / TASKS_FILE).write_text(json.dumps({"sampler": sampler}))


def load_envs(directory: Path) -> dict[str, Any]:
    """What :func:`save_envs` wrote, for :meth:`llm_gym.stepping.EnvStepper.load_state_dict`.

    A checkpoint from before ``envs.json`` holds ``envs.pkl``: unpickling a file runs whatever code its maker put
    in it, so it is read only when ``LLM_GYM_TRUST_PICKLE=1`` says this run directory comes from someone trusted.
    """
    path = directory / ENVS_FILE
    if path.is_file():
        try:
            state = loads(path.read_bytes())
        except StateCodecError as exc:
            raise CheckpointError(f"{path} cannot be read: {exc}") from exc
        if not isinstance(state, dict):
            raise CheckpointError(f"{path} cannot be read: it holds a {type(state).__name__}, not the envs' state")
    elif (directory / LEGACY_ENVS_FILE).is_file():
        state = _load_legacy(directory / LEGACY_ENVS_FILE)
    else:
        raise CheckpointError(f"{path} is missing")
    tasks = directory / TASKS_FILE
    state["sampler"] = json.loads(tasks.read_text())["sampler"] if tasks.is_file() else None
    return state


def _load_legacy(path: Path) -> dict[str, Any]:
    if os.environ.get(TRUST_PICKLE_VARIABLE) != "1":
        raise CheckpointError(
            f"{path} is a pickle (an older llm-gym's env state): loading it runs any code its maker put in it, so it "
            f"is not loaded; if you made this run directory yourself, resume with {TRUST_PICKLE_VARIABLE}=1"
        )
    with open(path, "rb") as handle:
        return _LegacyUnpickler(handle).load()  # the user said this run directory is theirs (LLM_GYM_TRUST_PICKLE=1)


class _LegacyUnpickler(pickle.Unpickler):
    """Reads an old ``envs.pkl`` whose classes have since moved to other modules."""

    MOVED = {"llm_gym.snapshots": "llm_gym.envs.snapshots", "llm_gym.tasks": "llm_gym.envs.tasks"}

    def find_class(self, module: str, name: str) -> Any:
        if module == "llm_gym.tasks" and name in ("StagedCurriculum", "FailureReplay", "Stage"):
            module = "llm_gym.agents.curriculum.samplers"
        return super().find_class(self.MOVED.get(module, module), name)


def load_optimizer_state(optimizer: Any, scheduler: Any, optimizer_state: Any, scheduler_state: Any) -> None:
    """Load a checkpoint's optimizer and ``LambdaLR`` scheduler state, keeping the learning rates the optimizer was
    built with (this run's config), at the schedule's current point.

    The saved state holds the rates of the run that wrote it (each param group's ``lr`` and ``initial_lr``, the
    scheduler's ``base_lrs``): loaded as is, ``train --resume RUN --set learning_rate=X`` wrote X into the config
    and kept training at the old rate. With the same config the rates come out bit-identical to the saved ones.
    """
    configured = [group.get("initial_lr", group["lr"]) for group in optimizer.param_groups]
    optimizer.load_state_dict(optimizer_state)
    scheduler.load_state_dict(scheduler_state)
    scheduler.base_lrs = list(configured)
    for group, base, factor in zip(optimizer.param_groups, configured, scheduler.lr_lambdas, strict=True):
        group["initial_lr"] = base
        group["lr"] = base * factor(scheduler.last_epoch)  # what LambdaLR itself computes at this point
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


def training_env(env: EnvConfig) -> EnvConfig:
    """``env`` with its family's training defaults under the user's own arguments (Atari: ``fire_on_reset`` and
    ``terminal_on_life_loss``, see docs/guides/atari.md); what every learning agent trains on."""
    return EnvConfig(env.env_id, {**training_defaults(env.env_id), **env.kwargs})


def evaluation_env(env: EnvConfig) -> EnvConfig:
    """The env an evaluation plays: the training env (:func:`training_env`) with the family's evaluation overrides
    (Atari: whole games, so a greedy score compares with ``llm-gym play`` and the leaderboard)."""
    trained = training_env(env)
    return EnvConfig(env.env_id, {**trained.kwargs, **evaluation_overrides(env.env_id)})


SPREAD_SEED_KEY = 30_000
"""``start_spread``'s generator is seeded with (30,000, seed): apart from every other draw of a run."""


def spread_starts(stepper: EnvStepper, max_steps: int, seed: int, env_id: str, run: Run) -> None:
    """``start_spread`` (ppo_lora, nanogpt_ppo): random legal play before the first rollout
    (:meth:`llm_gym.stepping.EnvStepper.spread`), from a generator of its own so a run's other draws stay those of a
    run without it; logged as ``spread/*`` at step 0. An env or a setup it cannot take is a one-line config error."""
    started = time.perf_counter()
    try:
        report = stepper.spread(max_steps, np.random.default_rng([SPREAD_SEED_KEY, seed]))
    except ValueError as exc:
        raise ConfigError(f"start_spread on {env_id}: {exc}; leave start_spread at 0 for it") from exc
    run.log_scalars(0, {
        "spread/env_steps": float(sum(report.steps)), "spread/max_env_steps": float(max(report.steps)),
        "spread/episodes_ended": float(report.episodes_ended), "spread/seconds": time.perf_counter() - started,
    })  # fmt: skip


def crossed(before: int, after: int, every: int) -> bool:
    """Whether going from ``before`` to ``after`` env steps passed a multiple of ``every`` (0: never)."""
    return every > 0 and after // every > before // every


PROGRESS_FIXED_WIDTH = 34
"""What a training progress bar's counts, unit and times take (``12,000/20,000 env steps 0:01:02 0:09:40``)."""


def progress_bar(enabled: bool, unit: str = "env steps", console: Console | None = None) -> Progress:
    """The progress bar of a training run: what it trains (the task's description), a bar, the count of ``unit``
    done of all, elapsed and remaining time, and a status text. On a narrow terminal (80 columns) the description
    and the status are cut short and the bar shrinks; the count and the times are always shown whole."""
    width = (console or get_console()).width
    room = max(width - PROGRESS_FIXED_WIDTH - len(unit), 20)  # shared by the description, the bar and the status
    return Progress(
        TextColumn("[bold]{task.description}", table_column=_shrinking(room * 2 // 5)),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=3)),
        MofNCompleteColumn(table_column=Column(no_wrap=True)),
        TextColumn(unit, table_column=Column(no_wrap=True)),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}", table_column=_shrinking(room * 2 // 5)),
        disable=not enabled,
        console=console,
        expand=True,
    )


def _shrinking(width: int) -> Column:
    """A progress column cut to at most ``width`` cells with an ellipsis (never wrapped onto a second line)."""
    return Column(no_wrap=True, overflow="ellipsis", max_width=max(width, 8))


def training_started(callbacks: Sequence[Callback], env_id: str, config: Any, counters: Counters) -> None:
    for callback in callbacks:
        callback.on_training_start(env_id, config, counters.global_step)


def update_done(callbacks: Sequence[Callback], counters: Counters, metrics: Mapping[str, float]) -> bool:
    """Log-time callbacks of an update; True when one asked to stop."""
    return should_stop([c.on_update(counters.global_step, metrics) for c in callbacks])


def play_evaluation(
    policy: Policy,
    env: EnvConfig,
    episodes: int,
    seed: int,
    max_steps: int,
    video_path: Path | None = None,
    text_actions: bool = False,
    tasks: TaskSampler | None = None,
) -> tuple[list[float], list[float]]:
    """Returns and game scores of ``episodes`` episodes, all at once (one env each, at most 8), each cut at
    ``max_steps`` (0: no cut); episode ``i`` resets with ``seed + i``, the same at every evaluation, and with the
    options ``tasks`` hands out (from :func:`evaluation_sampler`; None: the env's own task). The env is
    :func:`evaluation_env` of ``env`` (Atari: whole games, FIRE as in training)."""
    results = run_episodes(
        policy, evaluation_env(env), episodes, seed=seed, num_envs=min(episodes, 8), max_steps=max_steps or None,
        video_path=video_path, text_actions=text_actions, sampler=tasks,
    )  # fmt: skip
    return [r.episode_return for r in results], [r.score for r in results]


MIN_EVALUATION_DECISIONS = 256
"""An evaluation plays at least this many decisions in all, however short the run (see :func:`scaled_eval_steps`)."""
MIN_EPISODE_CUT = 64
"""Nor is an evaluation episode cut shorter than this many steps, however many episodes share the decisions: a
board or card game (tic-tac-toe 5 moves, connect four 21) is played whole even by 100 evaluation episodes."""


def scaled_eval_steps(eval_max_steps: int, eval_episodes: int, budget: int) -> int:
    """The per-episode cut of a run's evaluations, scaled with the run: an evaluation plays at most about as many
    decisions as the run trains on (``budget``: its env steps, or decisions seen), but at least
    :data:`MIN_EVALUATION_DECISIONS` (and :data:`MIN_EPISODE_CUT` per episode), and never more per episode than
    ``eval_max_steps`` (0: no cut of its own). So a 32-step run on Breakout plays 4 episodes of 64 steps, not of
    2,000, while a long run keeps its whole games."""
    scaled = max(MIN_EVALUATION_DECISIONS, budget) // max(eval_episodes, 1)
    scaled = max(scaled, MIN_EPISODE_CUT)
    return min(eval_max_steps, scaled) if eval_max_steps else scaled


def evaluation_sampler(training_sampler: TaskSampler | None, seed: int) -> TaskSampler | None:
    """The tasks a learner's periodic evaluation plays while ``training_sampler`` picks its training episodes: the
    current stage's task range and options (a curriculum, also behind a failure buffer), ids drawn from ``seed``, so
    every evaluation within a stage plays the same tasks (with the evaluation's own episode seeds, not training's).
    None without a sampler (or one that names no tasks): the env's own task."""
    tasks = getattr(training_sampler, "evaluation_tasks", None)
    if tasks is None:
        return None
    task_range, options = tasks()
    return UniformTaskSampler(task_range, options, seed=seed)


def record_evaluation(run: Run, counters: Counters, returns: Sequence[float], scores: Sequence[float]) -> float:
    """Append an evaluation to the counters' history and log it; returns its mean return."""
    mean, ci = mean_ci95(list(returns))
    score = sum(scores) / len(scores) if scores else float("nan")
    counters.eval_history.append((counters.global_step, mean, score))
    run.log_scalars(counters.global_step, {"eval/mean_return": mean, "eval/ci95": ci, "eval/mean_score": score})
    return mean


def evaluated(
    run: Run,
    callbacks: Sequence[Callback],
    counters: Counters,
    returns: Sequence[float],
    scores: Sequence[float],
    save: Callable[[Path], None],
) -> bool:
    """After an evaluation: record and log it, keep ``checkpoints/best`` when it beats the best so far (``save``
    writes into the checkpoint directory; ``on_checkpoint`` fires for it), then ``on_evaluation``. True when a
    callback asked to stop."""
    step = counters.global_step
    mean = record_evaluation(run, counters, returns, scores)
    if mean > counters.best_eval_return:
        counters.best_eval_return = mean
        with run.checkpoint(step, name=BEST) as directory:
            save(directory)
        for callback in callbacks:
            callback.on_checkpoint(step, run.checkpoints_dir / BEST)
    return should_stop([c.on_evaluation(step, list(returns)) for c in callbacks])


def checkpointed(
    run: Run, callbacks: Sequence[Callback], counters: Counters, keep: int, save: Callable[[Path], None]
) -> Path:
    """Write ``checkpoints/step_N`` (atomically; ``save`` fills it), prune old ones, fire ``on_checkpoint``."""
    with run.checkpoint(counters.global_step) as directory:
        save(directory)
    run.prune_checkpoints(keep)
    path = run.checkpoints_dir / f"step_{counters.global_step}"
    for callback in callbacks:
        callback.on_checkpoint(counters.global_step, path)
    return path


def finished(run: Run, callbacks: Sequence[Callback], counters: Counters, summary: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``summary.json`` and fire ``on_training_end``; returns the summary."""
    out = dict(summary)
    run.write_summary(out)
    for callback in callbacks:
        callback.on_training_end(counters.global_step, out)
    return out


def base_summary(agent: str, env_id: str, counters: Counters, run: Run) -> dict[str, Any]:
    """The summary fields every agent reports."""
    history = counters.eval_history
    latest = run.latest_checkpoint()
    return {
        "agent": agent,
        "env_id": env_id,
        "env_steps": counters.global_step,
        "updates": counters.update,
        "episodes": counters.episodes,
        "eval_history": history,
        "first_eval_return": history[0][1] if history else None,
        "final_eval_return": history[-1][1] if history else None,
        "first_eval_score": history[0][2] if history else None,
        "final_eval_score": history[-1][2] if history else None,
        "best_eval_return": counters.best_eval_return if history else None,
        "wall_seconds": counters.wall_seconds,
        "cpu_seconds": counters.cpu_seconds,
        "steps_per_second": counters.global_step / max(counters.wall_seconds, 1e-9),
        "checkpoint": str(latest) if latest else None,
    }
