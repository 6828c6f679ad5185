"""The ``ppo_lora`` training loop, top to bottom: set up (or resume), then rollout -> advantages -> PPO update -> log
-> evaluate -> checkpoint until ``total_steps`` env steps. Advantages come from a group estimator (``advantage=group``
or ``step_group``: rollouts of whole episodes in groups that share a start, :mod:`llm_gym.agents.ppo_lora.groups`) or
from GAE with the value head (``advantage=gae``: fixed rollouts of ``num_steps`` per env). A callback returning
False stops the run after a checkpoint, so ``--resume`` picks it up exactly. Decisions, in the rollout and in the
greedy evaluation, all go through :func:`llm_gym.agents.ppo_lora.acting.act`; counters, callbacks and checkpoints
through :mod:`llm_gym.training`. With ``rollout_backend=vllm`` a vLLM engine picks the rollout's actions and gets the
adapter after every update (:mod:`llm_gym.agents.ppo_lora.engine`)."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym import training
from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import LivePolicy, Strategy, strategy_for
from llm_gym.agents.ppo_lora.action_head import ActionHead
from llm_gym.agents.ppo_lora.calibration import (
    CALIBRATION_SEED_OFFSET,
    calibration_rows,
    fit_action_bias,
    load_action_bias,
    mean_probabilities,
)
from llm_gym.agents.ppo_lora.checkpoint import (
    Counters,
    init_checkpoint,
    load_checkpoint,
    reference_adapter,
    save_checkpoint,
)
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.engine import EngineStoppedError, RolloutEngine, require_vllm
from llm_gym.agents.ppo_lora.groups import GroupRollout, collect_groups
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, VALUE_HEAD_FILE, ActorCritic
from llm_gym.agents.ppo_lora.rollout import (
    Rollout,
    action_scalars,
    collect,
    engine_gap,
    rollout_arrays,
    value_scalars,
)
from llm_gym.agents.ppo_lora.update import ppo_update, value_warmup_update
from llm_gym.callbacks import Callback
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import legal_choices
from llm_gym.envs.tasks import OptionsMix, TaskSampler
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.exact import ExactResult, check_exact_env, evaluate_exact
from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import (
    adaptive_entropy_coef,
    adaptive_kl_coef,
    compute_gae,
    cosine_schedule,
    explained_variance,
    linear_schedule,
)
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95
from llm_gym.stepping import EnvStepper, make_vector_env

EVAL_SEED_OFFSET = 10_000
"""Evaluation episodes use seeds seed + 10,000 + i: the same at every evaluation, apart from training's first ones."""


def _probe(env: EnvConfig, config: PPOLoRAConfig) -> EnvTraits:
    traits = EnvTraits.probe(env)
    if config.action_mode == "score" and traits.text_actions:
        raise UnsupportedEnvError(f"{env.env_id} takes free text as its action; use --set action_mode=generate")
    return traits


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


def initial_actor_critic(config: PPOLoRAConfig, instructions: str, resume: Path | None) -> ActorCritic:
    """The model a run starts from: the run's own checkpoint on --resume, else ``init_adapter``'s adapter and value
    head (a warm start, e.g. from sft), else a fresh LoRA; with the starting checkpoint's per-action offsets where it
    has them (they go with the adapter they were trained with)."""
    if resume:
        ac = ActorCritic(config, instructions, adapter=resume / ADAPTER_DIR)
        ac.set_action_bias(load_action_bias(resume))
        ac.load_action_head(resume)
        return ac
    if not config.init_adapter:
        return ActorCritic(config, instructions)
    start = init_checkpoint(config.init_adapter)
    ac = ActorCritic(config, instructions, adapter=start / ADAPTER_DIR)
    if (start / VALUE_HEAD_FILE).is_file():
        ac.load_value_head(start)
        _warn_if_head_mode_differs(ac, config, start)
    ac.set_action_bias(load_action_bias(start))
    ac.load_action_head(start)
    return ac


def starting_action_names(env: EnvConfig, seed: int) -> list[str]:
    """The action names legal at the first reset of ``env`` (seeded as the run's first env): an action head's table."""
    game = env.make()
    try:
        _, info = game.reset(seed=seed)
        return legal_choices(info, env.env_id)[1]
    finally:
        game.close()


def _warn_if_head_mode_differs(ac: ActorCritic, config: PPOLoRAConfig, start: Path) -> None:
    """A warm-started head keeps the input it was fitted on (its weights mean nothing on the other one), so a
    ``value_input`` that differs from it does not apply; say so rather than let the setting look honoured."""
    if ac.value_head is None:
        return
    loaded = ac.value_head.input_mode
    if loaded != config.value_input:
        warnings.warn(
            f"value_input={config.value_input} does not apply: the value head of {start} was trained with "
            f"value_input={loaded} and keeps it; to start a fresh {config.value_input} head, warm-start from a copy of the "
            f"checkpoint without {VALUE_HEAD_FILE}",
            stacklevel=2,
        )


def calibrate(ac: ActorCritic, env: EnvConfig, config: PPOLoRAConfig, run: Run) -> None:
    """``action_prior=calibrated`` on a run that starts without offsets: fit them on the starting policy and log the
    offsets, each action's mean probability before and after, and the seconds it took (``calibration/*`` at step 0)."""
    started = time.perf_counter()
    rows = calibration_rows(
        ac, env, config.calibration_states, config.starting_seed + CALIBRATION_SEED_OFFSET, config.max_episode_steps
    )
    bias = fit_action_bias(rows)
    before, after = mean_probabilities(rows), mean_probabilities(rows, bias)
    ac.set_action_bias(bias)
    scalars = {f"calibration/bias/{name}": value for name, value in bias.items()}
    scalars |= {f"calibration/prob_before/{name}": p for name, p in before.items()}
    scalars |= {f"calibration/prob_after/{name}": p for name, p in after.items()}
    run.log_scalars(0, scalars | {"calibration/seconds": time.perf_counter() - started})


def evaluate(
    ac: ActorCritic, strategy: Strategy, env: EnvConfig, config: PPOLoRAConfig, run: Run, step: int, renders: bool,
    greedy: bool = True, sampler: TaskSampler | None = None,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Returns and game scores of evaluation episodes with the current adapter, greedy or sampled (the policy as it
    acts in training), on the env's task or, with a training ``sampler`` (a curriculum), its current stage's tasks.
    The first greedy episode is recorded as a video where the env renders frames."""
    video = run.video_path(f"eval_step_{step}.mp4") if (config.video and renders and greedy) else None
    policy = LivePolicy(ac, strategy, env.env_id, seed=config.seed, greedy=greedy)
    seed = EVAL_SEED_OFFSET + config.seed
    # Returns include any reward shaping the env was asked for; the score is the game's own.
    max_steps = training.scaled_eval_steps(config.eval_max_steps, config.eval_episodes, config.total_steps)
    return training.play_evaluation(
        policy, env, config.eval_episodes, seed, max_steps, video, strategy.text_actions,
        training.evaluation_sampler(sampler, seed),
    )  # fmt: skip


def evaluate_exactly(ac: ActorCritic, strategy: Strategy, env: EnvConfig, run: Run, counters: Counters) -> ExactResult:
    """``eval_exact``: the greedy policy's exact evaluation against the random opponent, logged and kept."""
    result = evaluate_exact(LivePolicy(ac, strategy, env.env_id, greedy=True), env)
    scalars = {"eval/exact_return": result.expected_return, "eval/exact_win": result.win,
               "eval/exact_draw": result.draw, "eval/exact_loss": result.loss}  # fmt: skip
    optional = {"eval/exact_worst_return": result.worst_return, "eval/exploitability": result.exploitability}
    scalars |= {k: v for k, v in optional.items() if v is not None}
    run.log_scalars(counters.global_step, scalars)
    counters.exact_eval_history.append((counters.global_step, result.expected_return, result.win, result.loss))
    return result


def evaluate_both(
    ac: ActorCritic, strategy: Strategy, env: EnvConfig, config: PPOLoRAConfig, run: Run, counters: Counters,
    renders: bool, sampler: TaskSampler | None = None,
) -> tuple[list[float], list[float]]:  # fmt: skip
    """Sampled play beside greedy play on the same seeds (a greedy policy can stall where the sampled one plays):
    the sampled evaluation is logged as ``eval/sampled_*`` and kept in the counters; the greedy returns and scores
    are returned, for ``eval/mean_return`` and the best checkpoint."""
    step = counters.global_step
    returns, scores = evaluate(ac, strategy, env, config, run, step, renders, greedy=False, sampler=sampler)
    mean, ci = mean_ci95(returns)
    score = float(np.mean(scores))
    counters.sampled_eval_history.append((counters.global_step, mean, score))
    run.log_scalars(
        counters.global_step,
        {"eval/sampled_mean_return": mean, "eval/sampled_ci95": ci, "eval/sampled_mean_score": score},
    )
    return evaluate(ac, strategy, env, config, run, step, renders, sampler=sampler)


def train(
    config: PPOLoRAConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str,
    sampler: TaskSampler | None = None, rollout_engine: RolloutEngine | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Train and return the summary; ``sampler`` picks each training episode's reset options (a curriculum).
    With ``rollout_backend=vllm`` the run starts its own engine unless given one (``rollout_engine``, which it
    then leaves open: a test session shares one)."""
    # -- setup -------------------------------------------------------------------------------------------------
    if config.rollout_backend == "vllm" and rollout_engine is None:
        require_vllm()  # one line now, not after the model has loaded
    if config.start_spread and sampler is not None:
        raise ConfigError(
            "start_spread plays random actions before the first rollout, and those episodes would feed the "
            "curriculum's task statistics; leave start_spread at 0 with a curriculum"
        )
    if config.episode_options:
        if sampler is not None:
            raise ConfigError(
                "episode_options picks each training episode's reset options, and so does the curriculum's sampler: "
                "set the options in the curriculum's stages instead"
            )
        sampler = OptionsMix(config.episode_options, seed=config.seed)
    env = training.training_env(env)  # Atari: FIRE on reset, a life loss ends the episode (docs/guides/atari.md)
    configure_threads(config.threads)
    torch.manual_seed(config.starting_seed)  # the fresh LoRA and value head draw from it
    traits = _probe(env, config)
    if config.eval_exact:
        check_exact_env(env)  # one line now, not after the first rollout
    strategy = strategy_for(config)
    resume = run.resumed_from
    ac = initial_actor_critic(config, traits.instructions, resume)
    with_reference = config.kl_coef > 0 or config.kl_target > 0
    if with_reference and config.kl_reference == "start" and config.init_adapter:
        ac.use_reference_adapter(reference_adapter(run.path, config.init_adapter, resumed=resume is not None))
    if config.action_prior == "calibrated" and not resume and not ac.action_bias:
        calibrate(ac, env, config, run)
    if config.action_head == "standardized" and not resume and ac.action_head is None:
        ac.set_action_head(ActionHead(ac.hidden_size, starting_action_names(env, config.seed)))
    if config.init_seed is not None:  # what draws from torch's own generator from here on (LoRA dropout) follows seed
        torch.manual_seed(config.seed)
    params = ac.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    # The schedule is over the updates that train the policy: value warm-up updates neither count nor step it.
    total_updates = max(1, math.ceil(config.total_steps / config.rollout_size) - config.value_warmup_updates)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_factor(config, total_updates))
    generator = torch.Generator().manual_seed(config.seed)
    vector_env = make_vector_env(
        env, config.num_envs, text_actions=strategy.text_actions, max_episode_steps=config.max_episode_steps
    )
    stepper = EnvStepper(
        vector_env, seed=config.seed, sampler=sampler, group_size=config.group_size if config.uses_groups else 1
    )
    if resume:
        counters, next_done, env_state = load_checkpoint(resume, ac, optimizer, scheduler, generator)
        ac.refresh()
        stepper.load_state_dict(env_state)
        if counters.entropy_coef is None or config.entropy_target == 0:  # older checkpoint, or the floor turned off
            counters.entropy_coef = config.entropy_coef
    else:
        counters = Counters(kl_coef=config.kl_coef, entropy_coef=config.entropy_coef)
        next_done = torch.zeros(config.num_envs)
        if not config.uses_groups:  # a group rollout starts its own groups
            stepper.reset()
        if config.start_spread:
            training.spread_starts(stepper, config.start_spread, config.seed, env.env_id, run)
    engine = rollout_engine
    if config.rollout_backend == "vllm":
        engine = engine or RolloutEngine.start(config)
        engine.sync(ac)  # the adapter the run starts from (fresh, warm-started or resumed)
    training.training_started(callbacks, env.env_id, config, counters)
    evaluates = config.eval_episodes > 0 or config.eval_exact
    if not resume and evaluates:  # the untrained adapter, for the curve's first point
        if config.eval_exact:
            evaluate_exactly(ac, strategy, env, run, counters)
        if config.eval_episodes > 0:
            training.record_evaluation(
                run, counters, *evaluate_both(ac, strategy, env, config, run, counters, traits.renders_frames, sampler)
            )

    def save(directory: Path, envs: dict[str, Any] | None = None) -> None:
        envs = envs if envs is not None else stepper.state_dict()
        save_checkpoint(directory, ac, optimizer, scheduler, generator, counters, next_done, envs)

    def checkpoint_before_rollout(envs: dict[str, Any]) -> Path:
        return training.checkpointed(run, callbacks, counters, config.keep_checkpoints, lambda d: save(d, envs))

    progress = training.progress_bar(config.progress)
    clock = training.Clock(counters)
    stopped = False
    with progress:
        task = progress.add_task(
            f"{agent} {env.env_id}", total=config.total_steps, completed=min(counters.global_step, config.total_steps),
            status="",
        )  # fmt: skip
        while counters.global_step < config.total_steps and not stopped:
            started = time.perf_counter()
            # -- rollout: one batched LM call per step for all envs ------------------------------------------
            with ac.observing():  # the standardised heads (value_input, action_head): the states they follow
                rollout = _collect(
                    ac, strategy, stepper, config, env, generator, next_done, with_reference, engine,
                    checkpoint_before_rollout,
                )  # fmt: skip
            ac.fold_observed()  # every value and offset stays as the rollout computed it
            next_done = rollout.last_done
            collect_seconds = time.perf_counter() - started
            # -- advantages --------------------------------------------------------------------------------
            if isinstance(rollout, GroupRollout):
                advantages, returns = rollout.advantages(config), None
            else:
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
            warming = counters.update < config.value_warmup_updates  # the value head alone, the policy as it is
            if warming:
                metrics = value_warmup_update(ac, rollout, returns, config, generator)
            else:
                metrics = ppo_update(
                    ac, strategy, optimizer, rollout, advantages, returns, config, generator, counters.kl_coef,
                    counters.entropy_coef,
                )  # fmt: skip
                scheduler.step()
            if engine is not None and not warming:  # the next rollout acts with this update's adapter, never older
                engine.sync(ac)
            if config.kl_target > 0 and not warming:
                counters.kl_coef = adaptive_kl_coef(
                    counters.kl_coef, metrics["kl_ref"], config.kl_target, config.rollout_size, config.kl_horizon
                )
            if config.entropy_target > 0 and not warming:
                counters.entropy_coef = adaptive_entropy_coef(
                    counters.entropy_coef, metrics["entropy"], config.entropy_target, config.entropy_adapt_rate,
                    config.entropy_coef, config.entropy_coef_max,
                )  # fmt: skip
            # -- bookkeeping and logs ------------------------------------------------------------------------
            step_before = counters.global_step
            decided = rollout.size
            counters.global_step += decided
            counters.update += 1
            counters.episodes += len(rollout.finished)
            seconds = time.perf_counter() - started
            clock.tick()
            episodes = rollout_arrays(rollout)
            scalars = {f"losses/{k}": v for k, v in metrics.items()}
            if returns is not None:  # the value head's fit (gae)
                scalars["losses/explained_variance"] = explained_variance(arrays["values"].flatten(), returns.flatten())
                scalars.update(value_scalars(rollout, returns, config.gamma))
            scalars.update(
                {
                    # During the warm-up the warm-up's own lr (the policy optimizer's is unused until it ends).
                    "charts/learning_rate": config.value_warmup_learning_rate
                    if warming
                    else optimizer.param_groups[0]["lr"],
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
                status=(f"return {np.mean(recent):.1f} " if recent else "")
                + ("value warm-up " if warming else f"kl {metrics['kl_ref']:.3f} ")
                + f"{scalars['charts/decisions_per_second']:.1f} dec/s",
            )
            stopped = training.update_done(callbacks, counters, scalars)
            last = stopped or counters.global_step >= config.total_steps
            # -- evaluation (greedy and sampled), best checkpoint --------------------------------------------------------
            if evaluates and (last or training.crossed(step_before, counters.global_step, config.eval_every)):
                if config.eval_exact:
                    evaluate_exactly(ac, strategy, env, run, counters)
                if config.eval_episodes > 0:
                    returns_, scores = evaluate_both(
                        ac, strategy, env, config, run, counters, traits.renders_frames, sampler
                    )
                    stopped |= training.evaluated(run, callbacks, counters, returns_, scores, save)
                    last = last or stopped
            # -- checkpoint (atomic): everything --resume needs ----------------------------------------------
            if last or training.crossed(step_before, counters.global_step, config.checkpoint_every):
                training.checkpointed(run, callbacks, counters, config.keep_checkpoints, save)
    stepper.close()
    if engine is not None and rollout_engine is None:
        engine.close()

    # -- summary -----------------------------------------------------------------------------------------------
    summary = training.base_summary(agent, env.env_id, counters, run)
    sampled = counters.sampled_eval_history
    summary |= {
        "env_kwargs": dict(env.kwargs),
        "first_eval_sampled_return": sampled[0][1] if sampled else None,
        "final_eval_sampled_return": sampled[-1][1] if sampled else None,
        "first_eval_sampled_score": sampled[0][2] if sampled else None,
        "final_eval_sampled_score": sampled[-1][2] if sampled else None,
        "model": config.model,
        "action_mode": config.action_mode,
        "advantage": config.advantage,
        "action_bias": dict(ac.action_bias),
        "train_history": counters.train_history,
        "mean_return": training.recent_train_mean(counters.train_history, 1),
        "mean_raw_return": training.recent_train_mean(counters.train_history, 2),
        "videos": sorted(str(p) for p in run.videos_dir.glob("*.mp4")) if run.videos_dir.is_dir() else [],
        # episode_options: per set, the training episodes played with it and their mean return (the whole run)
        "episode_options": sampler.tallies() if isinstance(sampler, OptionsMix) else None,
        "exact_eval_history": counters.exact_eval_history,
    }
    if config.progress:
        _print_summary(summary)
    return training.finished(run, callbacks, counters, summary)


def _collect(
    ac: ActorCritic, strategy: Strategy, stepper: EnvStepper, config: PPOLoRAConfig, env: EnvConfig,
    generator: torch.Generator, next_done: torch.Tensor, with_reference: bool, engine: RolloutEngine | None,
    checkpoint: Callable[[dict[str, Any]], Path],
) -> Rollout:  # fmt: skip
    """One rollout (whole episodes in groups, or ``num_steps`` per env). Through an engine, where the envs and the
    RNGs stood before it is kept, so that an engine that dies mid-rollout leaves a checkpoint of exactly that point
    (the update boundary) and one line to resume."""

    def rollout() -> Rollout:
        if config.uses_groups:
            return collect_groups(ac, strategy, stepper, config, env.env_id, generator, with_reference, engine)
        return collect(ac, strategy, stepper, config, env.env_id, generator, next_done, with_reference, engine)

    if engine is None:
        return rollout()
    before = stepper.state_dict(), generator.get_state(), torch.get_rng_state()
    try:
        return rollout()
    except EngineStoppedError as exc:
        envs, generator_state, torch_state = before
        generator.set_state(generator_state)
        torch.set_rng_state(torch_state)
        path = checkpoint(envs)
        raise EngineStoppedError(
            f"{exc}. The rollout in progress was dropped; checkpoint {path} holds the run as it stood before it: "
            f"continue with llm-gym train --resume {path.parent.parent}"
        ) from exc


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console

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
