"""PPO for the nanoGPT actor-critic, top to bottom in the shape of CleanRL's ``ppo_atari.py``.

Setup -> (resume) -> loop over updates: rollout with N vector envs, GAE, epochs of shuffled minibatches with the
shared PPO losses, logging, periodic greedy evaluation (best checkpoint kept), periodic atomic checkpoints; any
callback that returns False stops the run after writing a checkpoint, so ``--resume`` picks it up exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo.buffer import RolloutBuffer
from llm_gym.agents.nanogpt_ppo.checkpoint import Counters, EnvLoopState, load_tasks, load_training, save_training
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import action_masks, lives, make_vector_env, restore, snapshots
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic, distribution_terms
from llm_gym.agents.nanogpt_ppo.policy import NanoGPTPolicy, env_for, load_network, network_shape, save_network
from llm_gym.agents.nanogpt_ppo.tokenizer import CharTokenizer
from llm_gym.callbacks import Callback, should_stop
from llm_gym.evaluation import run_episodes
from llm_gym.rl import cosine_schedule, explained_variance, ppo_losses
from llm_gym.runs import Run
from llm_gym.sampled_tasks import restore_sampler, sampler_state
from llm_gym.stats import mean_ci95
from llm_gym.tasks import TaskSampler

EVAL_SEED_OFFSET = 1_000_000
"""Evaluation episodes use seeds seed + 1e6 + i: never the training envs' seeds, the same at every evaluation."""


def evaluate(model: NanoGPTActorCritic, env: EnvConfig, config: NanoGPTPPOConfig) -> list[float]:
    """Returns of ``eval_episodes`` greedy episodes, each cut at ``eval_max_steps``."""
    policy = NanoGPTPolicy(model, deterministic=True, epsilon=config.eval_epsilon, seed=config.seed)
    results = run_episodes(
        policy,
        env,
        config.eval_episodes,
        seed=config.seed + EVAL_SEED_OFFSET,
        num_envs=min(config.eval_episodes, 8),
        max_steps=config.eval_max_steps,
    )
    return [r.episode_return for r in results]


def _crossed(before: int, after: int, every: int) -> bool:
    return every > 0 and after // every > before // every


def train(
    config: NanoGPTPPOConfig,
    env: EnvConfig,
    run: Run,
    callbacks: Sequence[Callback] = (),
    agent: str = "nanogpt_ppo",
    sampler: TaskSampler | None = None,
) -> dict[str, Any]:
    cfg = config.resolved()
    n, steps = cfg.num_envs, cfg.num_steps

    # ---- setup ------------------------------------------------------------------------------------------------
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = torch.device(cfg.device)
    env = env_for(cfg, env)
    shape = network_shape(cfg, env)
    model = NanoGPTActorCritic(shape).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2), eps=1e-5)
    generator = torch.Generator().manual_seed(cfg.seed)  # action sampling and minibatch order
    tokenizer = CharTokenizer()
    buffer = RolloutBuffer(steps, n, shape.context, shape.n_actions, device)
    envs = make_vector_env(env, n, cfg.vector_env, sampler)
    obs, infos = envs.reset(seed=[cfg.seed + i for i in range(n)])
    loop = EnvLoopState.fresh(obs, action_masks(infos, n, shape.n_actions), lives(infos, n))
    counters = Counters()
    if run.resumed_from is not None:
        model.load_state_dict(load_network(run.resumed_from, str(device)).state_dict())
        counters, loop, env_states = load_training(run.resumed_from, optimizer, generator)
        if env_states is not None:
            restore(envs, env_states)
        else:  # envs without snapshots start fresh episodes, seeded past the ones already played
            obs, infos = envs.reset(seed=[cfg.seed + counters.update * n + i for i in range(n)])
            loop = EnvLoopState.fresh(obs, action_masks(infos, n, shape.n_actions), lives(infos, n))
        sub_envs = getattr(envs, "envs", [])
        snapshot = env_states is not None
        restore_sampler(sampler, sub_envs, load_tasks(run.resumed_from), episodes=snapshot, same_tasks=snapshot)
    num_updates = cfg.num_updates
    clip = cfg.reward_clip
    for callback in callbacks:
        callback.on_training_start(env.env_id, config, counters.global_step)

    # ---- training loop ----------------------------------------------------------------------------------------
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("env steps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        disable=not cfg.progress,
    )
    task = progress.add_task(
        f"{agent} {env.env_id}", total=num_updates * n * steps, completed=counters.global_step, status=""
    )
    cpu_start, wall_start = time.process_time() - counters.cpu_seconds, time.perf_counter() - counters.wall_seconds
    stopped = False
    with progress:
        while counters.update < num_updates and not stopped:
            lr = cosine_schedule(counters.update, num_updates, cfg.learning_rate, cfg.final_learning_rate)
            for group in optimizer.param_groups:
                group["lr"] = lr
            step_before = counters.global_step
            finished_returns: list[float] = []
            finished_lengths: list[int] = []

            # -- rollout: N envs in lockstep, one batched forward pass per step ----------------------------------
            collect_start = time.perf_counter()
            model.eval()
            for t in range(steps):
                tokens, query = tokenizer.encode_batch(loop.observations, shape.context)
                with torch.inference_mode():
                    logits, value = model(
                        torch.from_numpy(tokens).to(device),
                        torch.from_numpy(query).to(device),
                        torch.from_numpy(loop.masks).to(device),
                    )
                    action = torch.multinomial(torch.softmax(logits.cpu(), -1), 1, generator=generator).squeeze(1)
                    logprob, _ = distribution_terms(logits.cpu(), action)
                buffer.add(t, tokens, query, loop.masks, loop.next_done, action, logprob, value.cpu())
                obs, reward, terminated, truncated, infos = envs.step(action.numpy())

                # A time limit is not a death: bootstrap V(final observation) into the reward of that step.
                truncated_value = torch.zeros(n)
                cut = np.flatnonzero(truncated & ~terminated)
                if len(cut):
                    final = [str(infos["final_obs"][i]) for i in cut]
                    final_tokens, final_query = tokenizer.encode_batch(final, shape.context)
                    with torch.inference_mode():
                        _, final_value = model(
                            torch.from_numpy(final_tokens).to(device), torch.from_numpy(final_query).to(device)
                        )
                    truncated_value[torch.from_numpy(cut)] = final_value.cpu()
                train_reward = np.clip(reward, -clip, clip) if clip > 0 else reward
                buffer.add_reward(t, torch.as_tensor(train_reward, dtype=torch.float32), truncated_value)

                ended = terminated | truncated
                now_lives = lives(infos, n)
                life_lost = (now_lives < loop.lives) & ~ended if cfg.life_loss_terminal else np.zeros(n, dtype=bool)
                loop.episode_return += reward
                loop.episode_length += 1
                for i in np.flatnonzero(ended):
                    finished_returns.append(float(loop.episode_return[i]))
                    finished_lengths.append(int(loop.episode_length[i]))
                loop.episode_return[ended] = 0.0
                loop.episode_length[ended] = 0
                loop.observations = list(obs)
                loop.masks = action_masks(infos, n, shape.n_actions)
                loop.lives = now_lives
                loop.next_done = torch.as_tensor(ended | life_lost, dtype=torch.float32)
                counters.global_step += n
            counters.episodes += len(finished_returns)

            tokens, query = tokenizer.encode_batch(loop.observations, shape.context)
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
            counters.cpu_seconds = time.process_time() - cpu_start
            counters.wall_seconds = time.perf_counter() - wall_start
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
                metrics["charts/episodic_length"] = float(np.mean(finished_lengths))
            run.log_scalars(counters.global_step, {k: v for k, v in metrics.items() if not math.isnan(v)})
            stopped = should_stop([c.on_update(counters.global_step, metrics) for c in callbacks])
            last = stopped or counters.update >= num_updates

            # -- evaluate (greedy), keep the best network ---------------------------------------------------------
            if last or _crossed(step_before, counters.global_step, cfg.eval_every):
                returns = evaluate(model, env, cfg)
                mean, ci = mean_ci95(returns)
                counters.eval_history.append((counters.global_step, mean))
                run.log_scalars(
                    counters.global_step,
                    {"eval/mean_return": mean, "eval/ci95": ci, "eval/cpu_seconds": counters.cpu_seconds},
                )
                progress.console.print(
                    f"step {counters.global_step}: eval return {mean:.2f} ± {ci:.2f} (n={len(returns)}), "
                    f"{counters.cpu_seconds:.0f} CPU s, {counters.wall_seconds:.0f} s"
                )
                if mean > counters.best_eval_return:
                    counters.best_eval_return = mean
                    with run.checkpoint(counters.global_step, name="best") as directory:
                        save_network(model, directory)
                    for callback in callbacks:
                        callback.on_checkpoint(counters.global_step, run.checkpoints_dir / "best")
                if should_stop([c.on_evaluation(counters.global_step, returns) for c in callbacks]):
                    stopped = last = True
                progress.update(task, status=f"eval {mean:.1f} (best {counters.best_eval_return:.1f})")

            # -- checkpoint (atomic), everything --resume needs ---------------------------------------------------
            if last or _crossed(step_before, counters.global_step, cfg.checkpoint_every):
                with run.checkpoint(counters.global_step) as directory:
                    save_network(model, directory)
                    tasks = sampler_state(sampler, getattr(envs, "envs", []))
                    save_training(directory, optimizer, generator, counters, loop, snapshots(envs), tasks)
                run.prune_checkpoints(cfg.keep_checkpoints)
                for callback in callbacks:
                    callback.on_checkpoint(counters.global_step, run.checkpoints_dir / f"step_{counters.global_step}")
            progress.update(task, completed=counters.global_step)
    envs.close()

    # ---- summary ----------------------------------------------------------------------------------------------
    final_mean = counters.eval_history[-1][1] if counters.eval_history else float("nan")
    summary = {
        "agent": agent,
        "env_id": env.env_id,
        "env_kwargs": dict(env.kwargs),
        "preset": cfg.preset,
        "env_steps": counters.global_step,
        "updates": counters.update,
        "episodes": counters.episodes,
        "mean_return": final_mean,
        "best_eval_return": counters.best_eval_return,
        "eval_history": counters.eval_history,
        "stopped_early": stopped and counters.update < num_updates,
        "cpu_seconds": counters.cpu_seconds,
        "wall_seconds": counters.wall_seconds,
        "steps_per_second": counters.global_step / max(counters.wall_seconds, 1e-9),
        "parameters": sum(p.numel() for p in model.parameters()),
        "context": shape.context,
    }
    run.write_summary(summary)
    for callback in callbacks:
        callback.on_training_end(counters.global_step, summary)
    return summary
