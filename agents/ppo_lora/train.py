"""The ``ppo_lora`` training loop, top to bottom, in the steps CleanRL's loop has: collect a rollout, estimate the
advantages, update, log, evaluate, checkpoint, until ``total_steps`` env steps. Advantages come from a group
estimator (``advantage=group`` or ``step_group``: rollouts of whole episodes in groups that share a start,
:mod:`llm_gym.agents.ppo_lora.groups`) or from GAE with the value head (``advantage=gae``: fixed rollouts of
``num_steps`` per env). What the run holds, and how it starts or resumes: :mod:`llm_gym.agents.ppo_lora.session`;
its evaluations: :mod:`llm_gym.agents.ppo_lora.evaluation`. A callback returning False stops the run after a
checkpoint, so ``--resume`` picks it up exactly. With ``rollout_backend=vllm`` a vLLM engine picks the rollout's
actions and gets the adapter after every update (:mod:`llm_gym.agents.ppo_lora.engine`)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from rich.console import Console

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.engine import EngineStoppedError, RolloutEngine
from llm_gym.agents.ppo_lora.evaluation import EVAL_SEED_OFFSET, evaluate, evaluate_session
from llm_gym.agents.ppo_lora.exact_update import TreeRollout, collect_tree, exact_update
from llm_gym.agents.ppo_lora.groups import GroupRollout, collect_groups
from llm_gym.agents.ppo_lora.rollout import (
    Rollout,
    RolloutActor,
    action_scalars,
    collect,
    engine_gap,
    rollout_arrays,
    value_scalars,
)
from llm_gym.agents.ppo_lora.session import Session, initial_actor_critic, start_session
from llm_gym.agents.ppo_lora.update import ppo_update, value_warmup_update
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import OptionsMix, TaskSampler
from llm_gym.rl import adaptive_entropy_coef, adaptive_kl_coef, compute_gae, explained_variance
from llm_gym.runs import Run
from llm_gym.training import loop as training

__all__ = ["EVAL_SEED_OFFSET", "evaluate", "initial_actor_critic", "train"]


def train(
    config: PPOLoRAConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str,
    sampler: TaskSampler | None = None, rollout_engine: RolloutEngine | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Train and return the summary; ``sampler`` picks each training episode's reset options (a curriculum).
    With ``rollout_backend=vllm`` the run starts its own engine unless given one (``rollout_engine``, which it
    then leaves open: a test session shares one)."""
    s = start_session(config, env, run, callbacks, agent, sampler, rollout_engine)
    counters = s.counters
    training.training_started(callbacks, s.env.env_id, config, counters)
    evaluates = config.eval_episodes > 0 or config.eval_exact
    if not run.resumed_from and evaluates:
        evaluate_session(s, untrained=True)
    clock, stopped = training.Clock(counters), False
    with training.progress_bar(config.progress) as progress:
        task = progress.add_task(f"{agent} {s.env.env_id}", total=config.total_steps,
                                 completed=min(counters.global_step, config.total_steps), status="")  # fmt: skip
        while counters.global_step < config.total_steps and not stopped:
            started = time.perf_counter()
            rollout = collect_rollout(s)  # -- collect: one batched LM call per step for all envs
            collect_seconds = time.perf_counter() - started
            advantages, returns = estimate_advantages(rollout, config)  # -- advantages
            metrics, warming = update(s, rollout, advantages, returns)  # -- update
            step_before = counters.global_step  # -- bookkeeping and logs
            counters.global_step += rollout.size
            counters.update += 1
            counters.episodes += len(rollout.finished)
            clock.tick()
            scalars = update_scalars(s, rollout, metrics, returns, warming, collect_seconds, started)
            run.log_scalars(counters.global_step, {k: v for k, v in scalars.items() if not math.isnan(v)})
            progress.update(task, completed=min(counters.global_step, config.total_steps),
                            status=_status(s, metrics, warming, scalars))  # fmt: skip
            stopped = training.update_done(callbacks, counters, scalars)
            last = stopped or counters.global_step >= config.total_steps
            if evaluates and (last or training.crossed(step_before, counters.global_step, config.eval_every)):
                stopped |= evaluate_session(s)  # -- evaluate (exact, greedy and sampled), keep the best
                last = last or stopped
            if last or training.crossed(step_before, counters.global_step, config.checkpoint_every):
                s.checkpoint()  # -- checkpoint (atomic): everything --resume needs
    s.close()
    return finish(s)


def collect_rollout(s: Session) -> Rollout:
    """One rollout (whole episodes in groups, or ``num_steps`` per env). Through an engine, where the envs and the
    RNGs stood before it is kept, so that an engine that dies mid-rollout leaves a checkpoint of exactly that point
    (the update boundary) and one line to resume."""
    config, env_id = s.config, s.env.env_id

    def rollout() -> Rollout:
        with s.ac.observing():  # the standardised heads (value_input, action_head): the states they follow
            actor = RolloutActor(s.ac, s.strategy, s.generator, s.with_reference, s.engine)
            if s.positions is not None:  # advantage=exact: every position of the tree, no episodes
                return collect_tree(actor, s.positions, config, env_id)
            if config.uses_groups:
                return collect_groups(actor, s.stepper, config, env_id)
            return collect(actor, s.stepper, config, env_id, s.next_done)

    if s.engine is None:
        collected = rollout()
    else:
        before = s.stepper.state_dict(), s.generator.get_state(), torch.get_rng_state()
        try:
            collected = rollout()
        except EngineStoppedError as exc:
            envs, generator_state, torch_state = before
            s.generator.set_state(generator_state)
            torch.set_rng_state(torch_state)
            path = s.checkpoint(envs)
            raise EngineStoppedError(
                f"{exc}. The rollout in progress was dropped; checkpoint {path} holds the run as it stood before it: "
                f"continue with llm-gym train --resume {path.parent.parent}"
            ) from exc
    s.ac.fold_observed()  # every value and offset stays as the rollout computed it
    if collected.last_done is not None:  # exact: no env stepped
        s.next_done = collected.last_done
    return collected


def estimate_advantages(rollout: Rollout, config: PPOLoRAConfig) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(advantages, returns): a group estimator's (no returns: there is no value head), or GAE's; ``exact``'s are
    in the rollout's targets already (none here)."""
    if isinstance(rollout, TreeRollout):
        return torch.zeros(0), None
    if isinstance(rollout, GroupRollout):
        return rollout.advantages(config), None
    arrays = rollout.stacked()
    return compute_gae(arrays["rewards"], arrays["values"], arrays["dones"], rollout.last_value, rollout.last_done,
                       config.gamma, config.gae_lambda, arrays["truncated_values"])  # fmt: skip


def update(
    s: Session, rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor | None
) -> tuple[dict[str, float], bool]:
    """The PPO update (or, during ``value_warmup_updates``, the value head's fit alone), then the schedule, the
    engine's adapter and the adaptive coefficients; returns the update's metrics and whether it was a warm-up."""
    config, counters = s.config, s.counters
    warming = counters.update < config.value_warmup_updates  # the value head alone, the policy as it is
    if warming:
        return value_warmup_update(s.ac, rollout, returns, config, s.generator), True
    if isinstance(rollout, TreeRollout):
        metrics = exact_update(s.ac, s.optimizer, rollout, config, s.generator, counters.kl_coef)
    else:
        metrics = ppo_update(s.ac, s.strategy, s.optimizer, rollout, advantages, returns, config, s.generator,
                             counters.kl_coef, counters.entropy_coef)  # fmt: skip
    s.scheduler.step()
    if s.engine is not None:  # the next rollout acts with this update's adapter, never older
        s.engine.sync(s.ac)
    if config.kl_target > 0:
        counters.kl_coef = adaptive_kl_coef(
            counters.kl_coef, metrics["kl_ref"], config.kl_target, config.rollout_size, config.kl_horizon
        )
    if config.entropy_target > 0:
        counters.entropy_coef = adaptive_entropy_coef(
            counters.entropy_coef, metrics["entropy"], config.entropy_target, config.entropy_adapt_rate,
            config.entropy_coef, config.entropy_coef_max,
        )  # fmt: skip
    return metrics, False


def update_scalars(
    s: Session, rollout: Rollout, metrics: dict[str, float], returns: torch.Tensor | None, warming: bool,
    collect_seconds: float, started: float,
) -> dict[str, float]:  # fmt: skip
    """What an update logs (``losses/*``, ``charts/*``, ``values/*``, ``policy/*``), and the finished training
    episodes' means, which also go into the counters' training history."""
    config, counters = s.config, s.counters
    decided, seconds = rollout.size, time.perf_counter() - started
    scalars = {f"losses/{k}": v for k, v in metrics.items()}
    if returns is not None:  # the value head's fit (gae)
        values = rollout.stacked()["values"]
        scalars["losses/explained_variance"] = explained_variance(values.flatten(), returns.flatten())
        scalars.update(value_scalars(rollout, returns, config.gamma))
    scalars.update({
        # During the warm-up the warm-up's own lr (the policy optimizer's is unused until it ends).
        "charts/learning_rate": config.value_warmup_learning_rate if warming else s.optimizer.param_groups[0]["lr"],
        "charts/kl_coef": counters.kl_coef,
        "charts/entropy_coef": counters.entropy_coef,
        "charts/invalid_action_rate": rollout.invalid / decided,
        "charts/raw_reward_per_1k_steps": 1000 * rollout.raw_reward / decided,
        "charts/decisions_per_second": decided / collect_seconds,
        "charts/update_seconds": seconds - collect_seconds,
        "charts/sps": decided / seconds,
        "charts/episodes": counters.episodes,
        **engine_gap(rollout),
        **action_scalars(rollout),
    })  # fmt: skip
    if isinstance(rollout, TreeRollout):  # the exact return of the policy the update started from (sampling)
        scalars["exact/policy_return"] = rollout.start_return
    episodes = rollout_arrays(rollout)
    if len(episodes["returns"]):
        mean_return, raw = float(episodes["returns"].mean()), float(episodes["raw_returns"].mean())
        counters.train_history.append((counters.global_step, mean_return, raw, len(episodes["returns"])))
        scalars |= {"charts/episodic_return": mean_return, "charts/episodic_raw_return": raw,
                    "charts/episodic_length": float(episodes["lengths"].mean())}  # fmt: skip
    return scalars


def _status(s: Session, metrics: dict[str, float], warming: bool, scalars: dict[str, float]) -> str:
    recent = [entry[1] for entry in s.counters.train_history[-5:]]
    return (
        (f"return {np.mean(recent):.1f} " if recent else "")
        + ("value warm-up " if warming else f"kl {metrics['kl_ref']:.3f} ")
        + f"{scalars['charts/decisions_per_second']:.1f} dec/s"
    )


def finish(s: Session) -> dict[str, Any]:
    """The summary (written as ``summary.json``, printed under a progress bar), and the callbacks' last word."""
    config, counters, run = s.config, s.counters, s.run
    summary = training.base_summary(s.agent, s.env.env_id, counters, run)
    sampled = counters.sampled_eval_history
    summary |= {
        "env_kwargs": dict(s.env.kwargs),
        "first_eval_sampled_return": sampled[0][1] if sampled else None,
        "final_eval_sampled_return": sampled[-1][1] if sampled else None,
        "first_eval_sampled_score": sampled[0][2] if sampled else None,
        "final_eval_sampled_score": sampled[-1][2] if sampled else None,
        "model": config.model,
        "action_mode": config.action_mode,
        "advantage": config.advantage,
        "action_bias": dict(s.ac.action_bias),
        "train_history": counters.train_history,
        "mean_return": training.recent_train_mean(counters.train_history, 1),
        "mean_raw_return": training.recent_train_mean(counters.train_history, 2),
        "videos": sorted(str(p) for p in run.videos_dir.glob("*.mp4")) if run.videos_dir.is_dir() else [],
        # episode_options: per set, the training episodes played with it and their mean return (the whole run)
        "episode_options": s.sampler.tallies() if isinstance(s.sampler, OptionsMix) else None,
        "exact_eval_history": counters.exact_eval_history,
    }
    if config.progress:
        _print_summary(summary)
    return training.finished(run, s.callbacks, counters, summary)


def _print_summary(summary: dict[str, Any]) -> None:
    console = Console()
    if summary["first_eval_return"] is not None:
        console.print(f"evaluation, before -> after {summary['env_steps']} env steps:")
        for kind, key in (("greedy", "eval"), ("sampled", "eval_sampled")):
            console.print(
                f"  {kind:8s} return {summary[f'first_{key}_return']:.2f} -> {summary[f'final_{key}_return']:.2f}, "
                f"game score {summary[f'first_{key}_score']:.2f} -> {summary[f'final_{key}_score']:.2f}"
            )
    if summary["mean_return"] is not None:
        console.print(
            f"training episodes, last rollouts: return {summary['mean_return']:.2f}, game score {summary['mean_raw_return']:.2f}"
        )
    for tally in summary["episode_options"] or ():
        mean = "-" if tally["mean_return"] is None else f"{tally['mean_return']:.2f}"
        console.print(f"training episodes with {tally['options']}: {tally['episodes']}, mean return {mean}")
    console.print(f"checkpoint: {summary['checkpoint']}")
    for video in summary["videos"][-1:]:
        console.print(f"video: {video}")
