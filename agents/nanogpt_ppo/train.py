"""PPO for the nanoGPT actor-critic, top to bottom in the shape of CleanRL's ``ppo_atari.py``.

Setup -> (resume) -> loop over updates: rollout with N vector envs, GAE, epochs of shuffled minibatches with the
shared PPO losses, logging, periodic greedy evaluation (best checkpoint kept), periodic atomic checkpoints; any
callback that returns False stops the run after writing a checkpoint, so ``--resume`` picks it up exactly.
What the run holds, and how it starts or resumes: :mod:`llm_gym.agents.nanogpt_ppo.session`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from rich.progress import Progress, TaskID

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import action_masks, lives
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic, distribution_terms
from llm_gym.agents.nanogpt_ppo.policy import NanoGPTPolicy, save_network
from llm_gym.agents.nanogpt_ppo.session import Session, start_session
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import TaskSampler
from llm_gym.rl import cosine_schedule, explained_variance, ppo_losses
from llm_gym.runs import Run
from llm_gym.training.loop import (
    Clock,
    base_summary,
    checkpointed,
    crossed,
    evaluated,
    evaluation_sampler,
    finished,
    play_evaluation,
    progress_bar,
    recent_train_mean,
    scaled_eval_steps,
    training_started,
    update_done,
)

EVAL_SEED_OFFSET = 1_000_000
"""Evaluation episodes use seeds seed + 1e6 + i: never the training envs' seeds, the same at every evaluation."""


def evaluate(
    model: NanoGPTActorCritic, env: EnvConfig, config: NanoGPTPPOConfig, sampler: TaskSampler | None = None
) -> tuple[list[float], list[float]]:
    """Returns and game scores of ``eval_episodes`` greedy episodes, each cut at ``eval_max_steps`` (sooner in a
    short run), on the env's task or, with a training ``sampler`` (a curriculum), its current stage's tasks."""
    policy = NanoGPTPolicy(model, deterministic=True, epsilon=config.eval_epsilon, seed=config.seed)
    seed = config.seed + EVAL_SEED_OFFSET
    tasks = evaluation_sampler(sampler, seed)
    # Scaled with the run (llm_gym.training.loop.scaled_eval_steps): a 4,096-step run plays no 4,500-step games.
    max_steps = scaled_eval_steps(config.eval_max_steps, config.eval_episodes, config.total_steps)
    return play_evaluation(policy, env, config.eval_episodes, seed, max_steps, tasks=tasks)


def train(
    config: NanoGPTPPOConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = (), agent: str = "nanogpt_ppo",
    sampler: TaskSampler | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Train and return the summary; ``sampler`` picks each training episode's reset options (a curriculum)."""
    s = start_session(config, env, run, callbacks, sampler)
    cfg, counters = s.cfg, s.counters
    training_started(callbacks, s.env.env_id, config, counters)
    progress = progress_bar(cfg.progress)
    task = progress.add_task(
        f"{agent} {s.env.env_id}", total=cfg.num_updates * cfg.num_envs * cfg.num_steps,
        completed=counters.global_step, status="",
    )  # fmt: skip
    clock, stopped = Clock(counters), False
    if cfg.eval_at_start and run.resumed_from is None:  # the untrained network: the run's own "before"
        stopped = evaluate_now(s, progress, task, untrained=True)
    with progress:
        while counters.update < cfg.num_updates and not stopped:
            lr = cosine_schedule(counters.update, cfg.num_updates, cfg.learning_rate, cfg.final_learning_rate)
            for group in s.optimizer.param_groups:
                group["lr"] = lr
            step_before = counters.global_step
            rollout = collect_rollout(s)  # -- rollout: N envs in lockstep, one batched forward pass per step; GAE
            losses, update_seconds = update(s)  # -- update: epochs of shuffled minibatches
            counters.update += 1
            clock.tick()  # -- log
            scalars = update_scalars(s, rollout, losses, update_seconds, lr)
            run.log_scalars(counters.global_step, {k: v for k, v in scalars.items() if not math.isnan(v)})
            stopped = update_done(callbacks, counters, scalars)
            last = stopped or counters.update >= cfg.num_updates
            if last or crossed(step_before, counters.global_step, cfg.eval_every):
                stopped |= evaluate_now(s, progress, task)  # -- evaluate (greedy), keep the best network
                last = last or stopped
            if last or crossed(step_before, counters.global_step, cfg.checkpoint_every):
                checkpointed(run, callbacks, counters, cfg.keep_checkpoints, s.save)  # -- checkpoint (atomic)
            progress.update(task, completed=counters.global_step)
    s.stepper.close()
    return finish(s, agent, stopped)


@dataclass
class Rollout:
    """What a rollout reports besides the buffer it filled: the episodes that ended in it, and its time."""

    returns: list[float] = field(default_factory=list)
    raw_returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    seconds: float = 0.0


def collect_rollout(s: Session) -> Rollout:
    """``num_steps`` steps of every env into the buffer (actions sampled from the policy), then GAE."""
    cfg, shape, model, counters, loop, device = s.cfg, s.shape, s.model, s.counters, s.loop, s.device
    n = cfg.num_envs
    rollout = Rollout()
    collect_start = time.perf_counter()
    model.eval()
    for t in range(cfg.num_steps):
        masks = action_masks(s.stepper.infos, shape.n_actions)
        tokens, query = s.tokenizer.encode_batch([str(o) for o in s.stepper.observations], shape.context)
        with torch.inference_mode():
            logits, value = model(
                torch.from_numpy(tokens).to(device),
                torch.from_numpy(query).to(device),
                torch.from_numpy(masks).to(device),
            )
            action = torch.multinomial(torch.softmax(logits.cpu(), -1), 1, generator=s.generator).squeeze(1)
            logprob, _ = distribution_terms(logits.cpu(), action)
        s.buffer.add(t, tokens, query, masks, loop.next_done, action, logprob, value.cpu())
        result = s.stepper.step(action.tolist())

        # A time limit is not a death: bootstrap V(final observation) into the reward of that step.
        truncated_value = torch.zeros(n)
        if result.final_observations:
            cut = sorted(result.final_observations)
            final = [str(result.final_observations[i]) for i in cut]
            final_tokens, final_query = s.tokenizer.encode_batch(final, shape.context)
            with torch.inference_mode():
                _, final_value = model(
                    torch.from_numpy(final_tokens).to(device), torch.from_numpy(final_query).to(device)
                )
            truncated_value[torch.tensor(cut)] = final_value.cpu()
        reward = result.rewards
        train_reward = np.clip(reward, -cfg.reward_clip, cfg.reward_clip) if cfg.reward_clip > 0 else reward
        s.buffer.add_reward(t, torch.as_tensor(train_reward, dtype=torch.float32), truncated_value)

        ended = result.terminated | result.truncated
        now_lives = lives(s.stepper.infos)
        life_lost = (now_lives < loop.lives) & ~ended if cfg.life_loss_terminal else np.zeros(n, dtype=bool)
        for episode in result.finished:
            rollout.returns.append(episode.stats.episode_return)
            rollout.raw_returns.append(episode.stats.raw_return)
            rollout.lengths.append(episode.stats.length)
        loop.lives = now_lives
        loop.next_done = torch.as_tensor(ended | life_lost, dtype=torch.float32)
        counters.global_step += n
    counters.episodes += len(rollout.returns)
    if rollout.returns:
        counters.train_history.append(
            (counters.global_step, float(np.mean(rollout.returns)), float(np.mean(rollout.raw_returns)),
             len(rollout.returns))
        )  # fmt: skip

    tokens, query = s.tokenizer.encode_batch([str(o) for o in s.stepper.observations], shape.context)
    with torch.inference_mode():
        _, last_value = model(torch.from_numpy(tokens).to(device), torch.from_numpy(query).to(device))
    s.buffer.compute_returns(last_value.cpu(), loop.next_done, cfg.gamma, cfg.gae_lambda)
    rollout.seconds = time.perf_counter() - collect_start
    return rollout


def update(s: Session) -> tuple[dict[str, float], float]:
    """``update_epochs`` epochs of shuffled minibatches with the shared PPO losses (an epoch whose mean KL passes
    ``target_kl`` ends the update); the losses averaged over the minibatches, and the update's time."""
    cfg, model = s.cfg, s.model
    update_start = time.perf_counter()
    model.train()
    sums: dict[str, float] = {}
    count = 0
    for _epoch in range(cfg.update_epochs):
        epoch_kl, epoch_batches = 0.0, 0
        for mb in s.buffer.minibatches(cfg.minibatch_size, s.generator):
            logits, new_value = model(mb.tokens, mb.query_index, mb.action_mask)
            new_logprob, entropy = distribution_terms(logits, mb.actions)
            losses = ppo_losses(
                new_logprob,
                mb.logprobs,
                mb.advantages,
                new_value,
                mb.values,
                mb.returns,
                entropy,
                clip_coef=cfg.clip_coef,
                value_clip_coef=cfg.value_clip_coef or None,
                value_coef=cfg.value_coef,
                entropy_coef=cfg.entropy_coef,
            )
            s.optimizer.zero_grad(set_to_none=True)
            losses.loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            s.optimizer.step()
            parts = {
                "losses/policy_loss": losses.policy_loss,
                "losses/value_loss": losses.value_loss,
                "losses/entropy": losses.entropy,
                "losses/approx_kl": losses.approx_kl,
                "losses/clip_fraction": losses.clip_fraction,
                "losses/grad_norm": grad_norm,
            }
            for key, value in parts.items():
                sums[key] = sums.get(key, 0.0) + value.item()
            count += 1
            epoch_kl += float(losses.approx_kl)
            epoch_batches += 1
        if cfg.target_kl > 0 and epoch_kl / max(epoch_batches, 1) > cfg.target_kl:
            break
    return {key: value / max(count, 1) for key, value in sums.items()}, time.perf_counter() - update_start


def update_scalars(
    s: Session, rollout: Rollout, losses: dict[str, float], update_seconds: float, lr: float
) -> dict[str, float]:
    """What TensorBoard gets of one update: the losses, the value head's fit, speed, and the episodes that ended."""
    samples = s.cfg.num_envs * s.cfg.num_steps
    scalars = dict(losses)
    scalars |= {
        "losses/explained_variance": explained_variance(s.buffer.values.flatten(), s.buffer.returns.flatten()),
        "charts/learning_rate": lr,
        "charts/collect_sps": samples / rollout.seconds,
        "charts/sps": samples / (rollout.seconds + update_seconds),
        "charts/cpu_seconds": s.counters.cpu_seconds,
        "charts/episodes": s.counters.episodes,
    }
    if rollout.returns:
        scalars["charts/episodic_return"] = float(np.mean(rollout.returns))
        # The game's own points: with reward shaping the return above includes the shaping terms.
        scalars["charts/episodic_raw_return"] = float(np.mean(rollout.raw_returns))
        scalars["charts/episodic_length"] = float(np.mean(rollout.lengths))
    return scalars


def evaluate_now(s: Session, progress: Progress, task: TaskID, untrained: bool = False) -> bool:
    """A greedy evaluation (the best network kept), reported on the terminal; False when a callback asks to stop."""
    counters = s.counters
    returns, scores = evaluate(s.model, s.env, s.cfg, s.sampler)
    stopped = evaluated(s.run, s.callbacks, counters, returns, scores, lambda d: save_network(s.model, d))
    mean = counters.eval_history[-1][1]
    if untrained:
        progress.console.print(f"step 0: eval return {mean:.2f} (n={len(returns)}), untrained")
        return stopped
    progress.console.print(
        f"step {counters.global_step}: eval return {mean:.2f} (n={len(returns)}), "
        f"{counters.cpu_seconds:.0f} CPU s, {counters.wall_seconds:.0f} s"
    )
    progress.update(task, status=f"eval {mean:.1f} (best {counters.best_eval_return:.1f})")
    return stopped


def finish(s: Session, agent: str, stopped: bool) -> dict[str, Any]:
    """The run's summary, as ppo_lora's holds it, and the callbacks' end."""
    counters = s.counters
    summary = base_summary(agent, s.env.env_id, counters, s.run)
    summary |= {
        "env_kwargs": dict(s.env.kwargs),
        "preset": s.cfg.preset,
        # The training episodes' (sampled) return over the last rollouts, as ppo_lora reports it; the greedy
        # evaluation's is final_eval_return.
        "train_history": counters.train_history,
        "mean_return": recent_train_mean(counters.train_history, 1),
        "mean_raw_return": recent_train_mean(counters.train_history, 2),
        "stopped_early": stopped and counters.update < s.cfg.num_updates,
        "parameters": sum(p.numel() for p in s.model.parameters()),
        "context": s.shape.context,
    }
    return finished(s.run, s.callbacks, counters, summary)
