"""The ``ppo_lora`` training loop, top to bottom: set up (or resume), then rollout -> GAE -> PPO update -> log ->
evaluate -> checkpoint until ``total_steps`` env steps. A callback returning False stops the run after a checkpoint,
so ``--resume`` picks it up exactly."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.checkpoint import Counters, load_checkpoint, save_checkpoint
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.envs import EnvPool
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, ActorCritic
from llm_gym.agents.ppo_lora.policy import live_policy
from llm_gym.agents.ppo_lora.rollout import collect, rollout_arrays
from llm_gym.agents.ppo_lora.update import ppo_update
from llm_gym.callbacks import Callback, should_stop
from llm_gym.envs.protocol import EnvTraits
from llm_gym.errors import UnsupportedEnvError
from llm_gym.evaluation import run_episodes
from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import compute_gae, cosine_schedule, explained_variance, linear_schedule
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.tasks import TaskSampler


def _probe(env: EnvConfig, config: PPOLoRAConfig) -> tuple[str, bool]:
    traits = EnvTraits.probe(env)
    if config.action_mode == "score" and traits.text_actions:
        raise UnsupportedEnvError(f"{env.env_id} takes free text as its action; use --set action_mode=generate")
    return traits.instructions, traits.renders_frames


def _lr_factor(config: PPOLoRAConfig, total_updates: int):
    def factor(update: int) -> float:
        if config.lr_schedule == "constant":
            return min(1.0, (update + 1) / config.warmup_updates) if config.warmup_updates else 1.0
        if config.lr_schedule == "linear":
            if update < config.warmup_updates:
                return (update + 1) / config.warmup_updates
            return linear_schedule(
                update - config.warmup_updates, total_updates - config.warmup_updates, 1.0, config.min_lr_ratio
            )
        return cosine_schedule(update, total_updates, 1.0, config.min_lr_ratio, warmup=config.warmup_updates)

    return factor


def _crossed(before: int, after: int, every: int) -> bool:
    return every > 0 and before // every != after // every


def evaluate(
    ac: ActorCritic, env: EnvConfig, config: PPOLoRAConfig, run: Run, step: int, renders: bool
) -> tuple[float, float, float, list[float]]:
    """Greedy episodes with the current adapter: (mean return, 95% CI, mean game score, returns). The first episode
    is recorded as a video where the env renders frames."""
    video = run.video_path(f"eval_step_{step}.mp4") if (config.video and renders) else None
    results = run_episodes(
        live_policy(ac, env, config),
        env,
        config.eval_episodes,
        seed=10_000 + config.seed,
        num_envs=config.eval_episodes,
        max_steps=config.eval_max_steps or None,
        video_path=video,
    )
    returns = [r.episode_return for r in results]
    # The game's own score where the env reports one (returns include any reward shaping the env was asked for).
    scores = [float(r.final_info.get("score", r.episode_return)) for r in results]
    mean, ci = mean_ci95(returns)
    return mean, ci, float(np.mean(scores)), returns


def train(
    config: PPOLoRAConfig,
    env: EnvConfig,
    run: Run,
    callbacks: Sequence[Callback],
    agent: str,
    sampler: TaskSampler | None = None,
) -> dict[str, Any]:
    # -- setup -------------------------------------------------------------------------------------------------
    configure_threads(config.threads)
    torch.manual_seed(config.seed)
    instructions, renders = _probe(env, config)
    resume = run.resumed_from
    ac = ActorCritic(config, instructions, adapter=resume / ADAPTER_DIR if resume else None)
    params = ac.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    total_updates = max(1, math.ceil(config.total_steps / config.rollout_size))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_factor(config, total_updates))
    generator = torch.Generator().manual_seed(config.seed)
    pool = EnvPool(
        env,
        config.num_envs,
        config.seed,
        text_actions=config.action_mode == "generate",
        max_episode_steps=config.max_episode_steps,
        sampler=sampler,
    )
    with_reference = config.kl_coef > 0 or config.kl_target > 0
    if resume:
        counters, next_done, env_state = load_checkpoint(resume, ac, optimizer, scheduler, generator)
        ac.refresh()
        pool.restore(env_state)
    else:
        counters, next_done = Counters(kl_coef=config.kl_coef), torch.zeros(config.num_envs)
        pool.reset()
    for callback in callbacks:
        callback.on_training_start(env.env_id, config, counters.global_step)
    if not resume and config.eval_episodes > 0:
        mean, ci, score, _ = evaluate(ac, env, config, run, 0, renders)
        counters.eval_history.append((0, mean, score))
        run.log_scalars(0, {"eval/mean_return": mean, "eval/ci95": ci, "eval/mean_score": score})

    progress = Progress(
        TextColumn("[bold]ppo_lora[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=not config.progress,
    )
    stopped = False
    with progress:
        task = progress.add_task("", total=config.total_steps, completed=min(counters.global_step, config.total_steps))
        while counters.global_step < config.total_steps and not stopped:
            started = time.perf_counter()
            # -- rollout: one batched LM call per step for all envs ------------------------------------------
            rollout = collect(ac, pool, config, env.env_id, generator, next_done, with_reference)
            next_done = rollout.last_done
            collect_seconds = time.perf_counter() - started
            # -- advantages --------------------------------------------------------------------------------
            arrays = rollout.stacked()
            advantages, returns = compute_gae(
                arrays["rewards"],
                arrays["values"],
                arrays["dones"],
                rollout.last_value,
                rollout.last_done,
                config.gamma,
                config.gae_lambda,
                arrays["truncated_values"],
            )
            # -- PPO update ----------------------------------------------------------------------------------
            metrics = ppo_update(ac, optimizer, rollout, advantages, returns, config, generator, counters.kl_coef)
            scheduler.step()
            if config.kl_target > 0:  # Ziegler et al. 2019: proportional control of the KL coefficient
                error = float(np.clip(metrics["kl_ref"] / config.kl_target - 1.0, -0.2, 0.2))
                counters.kl_coef *= 1.0 + error * config.rollout_size / config.kl_horizon
            # -- bookkeeping and logs ------------------------------------------------------------------------
            step_before = counters.global_step
            counters.global_step += config.rollout_size
            counters.update += 1
            counters.episodes += len(rollout.finished)
            seconds = time.perf_counter() - started
            counters.wall_seconds += seconds
            episodes = rollout_arrays(rollout)
            scalars = {f"losses/{k}": v for k, v in metrics.items()}
            scalars.update(
                {
                    "losses/explained_variance": explained_variance(arrays["values"].flatten(), returns.flatten()),
                    "charts/learning_rate": optimizer.param_groups[0]["lr"],
                    "charts/kl_coef": counters.kl_coef,
                    "charts/invalid_action_rate": rollout.invalid / config.rollout_size,
                    "charts/raw_reward_per_1k_steps": 1000 * rollout.raw_reward / config.rollout_size,
                    "charts/decisions_per_second": config.rollout_size / collect_seconds,
                    "charts/sps": config.rollout_size / seconds,
                    "charts/episodes": counters.episodes,
                }
            )
            if len(episodes["returns"]):
                mean_return = float(episodes["returns"].mean())
                counters.train_history.append(
                    (counters.global_step, mean_return, float(episodes["raw_returns"].mean()), len(episodes["returns"]))
                )
                scalars.update(
                    {
                        "charts/episodic_return": mean_return,
                        "charts/episodic_raw_return": float(episodes["raw_returns"].mean()),
                        "charts/episodic_length": float(episodes["lengths"].mean()),
                    }
                )
            run.log_scalars(counters.global_step, {k: v for k, v in scalars.items() if not math.isnan(v)})
            recent = [entry[1] for entry in counters.train_history[-5:]]
            progress.update(
                task,
                completed=min(counters.global_step, config.total_steps),
                description=(f"return {np.mean(recent):.1f} " if recent else "")
                + f"kl {metrics['kl_ref']:.3f} {scalars['charts/decisions_per_second']:.1f} dec/s",
            )
            stopped = should_stop([c.on_update(counters.global_step, scalars) for c in callbacks])
            last = stopped or counters.global_step >= config.total_steps
            # -- evaluation (greedy), best checkpoint --------------------------------------------------------
            if config.eval_episodes > 0 and (last or _crossed(step_before, counters.global_step, config.eval_every)):
                mean, ci, score, returns_ = evaluate(ac, env, config, run, counters.global_step, renders)
                counters.eval_history.append((counters.global_step, mean, score))
                run.log_scalars(
                    counters.global_step, {"eval/mean_return": mean, "eval/ci95": ci, "eval/mean_score": score}
                )
                if mean > counters.best_eval_return:
                    counters.best_eval_return = mean
                    with run.checkpoint(counters.global_step, name="best") as directory:
                        save_checkpoint(
                            directory, ac, optimizer, scheduler, generator, counters, next_done, pool.state()
                        )
                stopped |= should_stop([c.on_evaluation(counters.global_step, returns_) for c in callbacks])
                last = last or stopped
            # -- checkpoint (atomic): everything --resume needs ----------------------------------------------
            if last or _crossed(step_before, counters.global_step, config.checkpoint_every):
                with run.checkpoint(counters.global_step) as directory:
                    save_checkpoint(directory, ac, optimizer, scheduler, generator, counters, next_done, pool.state())
                run.prune_checkpoints(config.keep_checkpoints)
                for callback in callbacks:
                    callback.on_checkpoint(counters.global_step, run.checkpoints_dir / f"step_{counters.global_step}")
    pool.close()

    # -- summary -----------------------------------------------------------------------------------------------
    summary = {
        "agent": agent,
        "env_id": env.env_id,
        "model": config.model,
        "action_mode": config.action_mode,
        "env_steps": counters.global_step,
        "updates": counters.update,
        "episodes": counters.episodes,
        "eval_history": counters.eval_history,
        "train_history": counters.train_history,
        "first_eval_return": counters.eval_history[0][1] if counters.eval_history else None,
        "final_eval_return": counters.eval_history[-1][1] if counters.eval_history else None,
        "first_eval_score": counters.eval_history[0][2] if counters.eval_history else None,
        "final_eval_score": counters.eval_history[-1][2] if counters.eval_history else None,
        "best_eval_return": counters.best_eval_return if counters.eval_history else None,
        "mean_return": _recent_mean(counters.train_history, 1),
        "mean_raw_return": _recent_mean(counters.train_history, 2),
        "wall_seconds": counters.wall_seconds,
        "steps_per_second": counters.global_step / max(counters.wall_seconds, 1e-9),
        "checkpoint": str(run.latest_checkpoint()) if run.latest_checkpoint() else None,
        "videos": sorted(str(p) for p in run.videos_dir.glob("*.mp4")) if run.videos_dir.is_dir() else [],
    }
    run.write_summary(summary)
    if config.progress:
        _print_summary(summary)
    for callback in callbacks:
        callback.on_training_end(counters.global_step, summary)
    return summary


def _recent_mean(history: list[tuple], column: int, last: int = 5) -> float | None:
    """Mean of one column over the last rollouts that finished episodes, weighted by their episode counts."""
    recent = history[-last:]
    if not recent:
        return None
    weights = [entry[3] for entry in recent]
    return float(np.average([entry[column] for entry in recent], weights=weights))


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    if summary["first_eval_return"] is not None:
        console.print(
            f"greedy evaluation: return {summary['first_eval_return']:.2f} -> {summary['final_eval_return']:.2f}, "
            f"game score {summary['first_eval_score']:.2f} -> {summary['final_eval_score']:.2f} "
            f"(before -> after {summary['env_steps']} env steps)"
        )
    if summary["mean_return"] is not None:
        console.print(
            f"training episodes, last rollouts: return {summary['mean_return']:.2f}, game score {summary['mean_raw_return']:.2f}"
        )
    console.print(f"checkpoint: {summary['checkpoint']}")
    for video in summary["videos"][-1:]:
        console.print(f"video: {video}")
