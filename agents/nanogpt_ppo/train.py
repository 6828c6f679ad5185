"""PPO for the nanoGPT actor-critic, top to bottom in the shape of CleanRL's ``ppo_atari.py``.

Setup -> (resume) -> loop over updates: rollout with N vector envs, GAE, epochs of shuffled minibatches with the
shared PPO losses, logging, periodic greedy evaluation (best checkpoint kept), periodic atomic checkpoints; any
callback that returns False stops the run after writing a checkpoint, so ``--resume`` picks it up exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo.buffer import RolloutBuffer
from llm_gym.agents.nanogpt_ppo.checkpoint import LoopState, load_training, save_training
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import action_masks, lives
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic, distribution_terms
from llm_gym.agents.nanogpt_ppo.policy import NanoGPTPolicy, env_for, load_network, network_shape, save_network
from llm_gym.agents.nanogpt_ppo.tokenizer import CharTokenizer
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import TaskSampler
from llm_gym.rl import cosine_schedule, explained_variance, ppo_losses
from llm_gym.runs import Run
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.loop import (
    Clock,
    Counters,
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
    spread_starts,
    training_env,
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
    cfg = config.resolved()
    n, steps = cfg.num_envs, cfg.num_steps

    # ---- setup ------------------------------------------------------------------------------------------------
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = torch.device(cfg.device)
    env = training_env(env_for(cfg, env))  # Atari: FIRE on reset, a life loss ends the episode (docs/guides/atari.md)
    shape = network_shape(cfg, env)
    model = NanoGPTActorCritic(shape).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2), eps=1e-5)
    generator = torch.Generator().manual_seed(cfg.seed)  # action sampling and minibatch order
    tokenizer = CharTokenizer()
    buffer = RolloutBuffer(steps, n, shape.context, shape.n_actions, device)
    stepper = EnvStepper(make_vector_env(env, n, kind=cfg.vector_env), seed=cfg.seed, sampler=sampler)
    counters = Counters()
    if run.resumed_from is not None:
        model.load_state_dict(load_network(run.resumed_from, str(device)).state_dict())
        counters, loop, env_state = load_training(run.resumed_from, optimizer, generator)
        if not stepper.load_state_dict(env_state):  # no snapshots: new episodes, numbered on
            loop = LoopState.fresh(lives(stepper.infos))
    else:
        stepper.reset()
        if cfg.start_spread:
            spread_starts(stepper, cfg.start_spread, cfg.seed, env.env_id, run)
        loop = LoopState.fresh(lives(stepper.infos))
    num_updates = cfg.num_updates
    training_started(callbacks, env.env_id, config, counters)

    # ---- training loop ----------------------------------------------------------------------------------------
    progress = progress_bar(cfg.progress)
    task = progress.add_task(
        f"{agent} {env.env_id}", total=num_updates * n * steps, completed=counters.global_step, status=""
    )
    clock = Clock(counters)
    stopped = False
    if cfg.eval_at_start and run.resumed_from is None:  # the untrained network: the run's own "before"
        returns, scores = evaluate(model, env, cfg, sampler)
        stopped = evaluated(run, callbacks, counters, returns, scores, lambda d: save_network(model, d))
        progress.console.print(f"step 0: eval return {counters.eval_history[-1][1]:.2f} (n={len(returns)}), untrained")
    with progress:
        while counters.update < num_updates and not stopped:
            lr = cosine_schedule(counters.update, num_updates, cfg.learning_rate, cfg.final_learning_rate)
            for group in optimizer.param_groups:
                group["lr"] = lr
            step_before = counters.global_step
            finished_returns: list[float] = []
            finished_raw_returns: list[float] = []
            finished_lengths: list[int] = []

            # -- rollout: N envs in lockstep, one batched forward pass per step ----------------------------------
            collect_start = time.perf_counter()
            model.eval()
            for t in range(steps):
                masks = action_masks(stepper.infos, shape.n_actions)
                tokens, query = tokenizer.encode_batch([str(o) for o in stepper.observations], shape.context)
                with torch.inference_mode():
                    logits, value = model(
                        torch.from_numpy(tokens).to(device),
                        torch.from_numpy(query).to(device),
                        torch.from_numpy(masks).to(device),
                    )
                    action = torch.multinomial(torch.softmax(logits.cpu(), -1), 1, generator=generator).squeeze(1)
                    logprob, _ = distribution_terms(logits.cpu(), action)
                buffer.add(t, tokens, query, masks, loop.next_done, action, logprob, value.cpu())
                result = stepper.step(action.tolist())

                # A time limit is not a death: bootstrap V(final observation) into the reward of that step.
                truncated_value = torch.zeros(n)
                if result.final_observations:
                    cut = sorted(result.final_observations)
                    final = [str(result.final_observations[i]) for i in cut]
                    final_tokens, final_query = tokenizer.encode_batch(final, shape.context)
                    with torch.inference_mode():
                        _, final_value = model(
                            torch.from_numpy(final_tokens).to(device), torch.from_numpy(final_query).to(device)
                        )
                    truncated_value[torch.tensor(cut)] = final_value.cpu()
                reward = result.rewards
                train_reward = np.clip(reward, -cfg.reward_clip, cfg.reward_clip) if cfg.reward_clip > 0 else reward
                buffer.add_reward(t, torch.as_tensor(train_reward, dtype=torch.float32), truncated_value)

                ended = result.terminated | result.truncated
                now_lives = lives(stepper.infos)
                life_lost = (now_lives < loop.lives) & ~ended if cfg.life_loss_terminal else np.zeros(n, dtype=bool)
                for episode in result.finished:
                    finished_returns.append(episode.stats.episode_return)
                    finished_raw_returns.append(episode.stats.raw_return)
                    finished_lengths.append(episode.stats.length)
                loop.lives = now_lives
                loop.next_done = torch.as_tensor(ended | life_lost, dtype=torch.float32)
                counters.global_step += n
            counters.episodes += len(finished_returns)
            if finished_returns:
                counters.train_history.append(
                    (
                        counters.global_step,
                        float(np.mean(finished_returns)),
                        float(np.mean(finished_raw_returns)),
                        len(finished_returns),
                    )
                )

            tokens, query = tokenizer.encode_batch([str(o) for o in stepper.observations], shape.context)
            with torch.inference_mode():
                _, last_value = model(torch.from_numpy(tokens).to(device), torch.from_numpy(query).to(device))
            buffer.compute_returns(last_value.cpu(), loop.next_done, cfg.gamma, cfg.gae_lambda)
            collect_seconds = time.perf_counter() - collect_start

            # -- update: epochs of shuffled minibatches ---------------------------------------------------------
            update_start = time.perf_counter()
            model.train()
            sums: dict[str, float] = {}
            count = 0
            for _epoch in range(cfg.update_epochs):
                epoch_kl, epoch_batches = 0.0, 0
                for mb in buffer.minibatches(cfg.minibatch_size, generator):
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
                    optimizer.zero_grad(set_to_none=True)
                    losses.loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
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
            update_seconds = time.perf_counter() - update_start
            counters.update += 1

            # -- log ----------------------------------------------------------------------------------------------
            clock.tick()
            samples = n * steps
            metrics = {key: value / max(count, 1) for key, value in sums.items()}
            metrics |= {
                "losses/explained_variance": explained_variance(buffer.values.flatten(), buffer.returns.flatten()),
                "charts/learning_rate": lr,
                "charts/collect_sps": samples / collect_seconds,
                "charts/sps": samples / (collect_seconds + update_seconds),
                "charts/cpu_seconds": counters.cpu_seconds,
                "charts/episodes": counters.episodes,
            }
            if finished_returns:
                metrics["charts/episodic_return"] = float(np.mean(finished_returns))
                # The game's own points: with reward shaping the return above includes the shaping terms.
                metrics["charts/episodic_raw_return"] = float(np.mean(finished_raw_returns))
                metrics["charts/episodic_length"] = float(np.mean(finished_lengths))
            run.log_scalars(counters.global_step, {k: v for k, v in metrics.items() if not math.isnan(v)})
            stopped = update_done(callbacks, counters, metrics)
            last = stopped or counters.update >= num_updates

            # -- evaluate (greedy), keep the best network ---------------------------------------------------------
            if last or crossed(step_before, counters.global_step, cfg.eval_every):
                returns, scores = evaluate(model, env, cfg, sampler)
                stopped |= evaluated(run, callbacks, counters, returns, scores, lambda d: save_network(model, d))
                last = last or stopped
                mean = counters.eval_history[-1][1]
                progress.console.print(
                    f"step {counters.global_step}: eval return {mean:.2f} (n={len(returns)}), "
                    f"{counters.cpu_seconds:.0f} CPU s, {counters.wall_seconds:.0f} s"
                )
                progress.update(task, status=f"eval {mean:.1f} (best {counters.best_eval_return:.1f})")

            # -- checkpoint (atomic), everything --resume needs ---------------------------------------------------
            if last or crossed(step_before, counters.global_step, cfg.checkpoint_every):

                def save(directory: Path) -> None:
                    save_network(model, directory)
                    save_training(directory, optimizer, generator, counters, loop, stepper.state_dict())

                checkpointed(run, callbacks, counters, cfg.keep_checkpoints, save)
            progress.update(task, completed=counters.global_step)
    stepper.close()

    # ---- summary ----------------------------------------------------------------------------------------------
    summary = base_summary(agent, env.env_id, counters, run)
    summary |= {
        "env_kwargs": dict(env.kwargs),
        "preset": cfg.preset,
        # The training episodes' (sampled) return over the last rollouts, as ppo_lora reports it; the greedy
        # evaluation's is final_eval_return.
        "train_history": counters.train_history,
        "mean_return": recent_train_mean(counters.train_history, 1),
        "mean_raw_return": recent_train_mean(counters.train_history, 2),
        "stopped_early": stopped and counters.update < num_updates,
        "parameters": sum(p.numel() for p in model.parameters()),
        "context": shape.context,
    }
    return finished(run, callbacks, counters, summary)
