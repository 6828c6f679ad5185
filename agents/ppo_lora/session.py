"""Everything a ``ppo_lora`` run holds while it trains, made once before its loop (:func:`start_session`): the
actor-critic (fresh, warm-started or resumed), its optimizer and schedule, the sampling generator, the envs and their
stepper, the counters, the rollout engine; and how all of it is written into a checkpoint (:meth:`Session.save`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
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
from llm_gym.agents.ppo_lora.engine import RolloutEngine, require_vllm
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, VALUE_HEAD_FILE, ActorCritic
from llm_gym.agents.ppo_lora.strategies import Strategy, strategy_for
from llm_gym.callbacks import Callback
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import legal_choices
from llm_gym.envs.tasks import OptionsMix, TaskSampler
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import cosine_schedule, linear_schedule
from llm_gym.runs import Run
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training import loop as training
from llm_gym.training.exact import check_exact_env
from llm_gym.training.position_tree import PositionTree


@dataclass
class Session:
    """A run in progress."""

    config: PPOLoRAConfig
    env: EnvConfig
    """The training env (the family's training defaults under the user's arguments)."""
    run: Run
    callbacks: Sequence[Callback]
    agent: str
    sampler: TaskSampler | None
    traits: EnvTraits
    strategy: Strategy
    ac: ActorCritic
    optimizer: torch.optim.Optimizer
    scheduler: Any
    generator: torch.Generator
    stepper: EnvStepper
    counters: Counters
    next_done: torch.Tensor
    """GAE's flags: whether each env's next observation starts an episode."""
    with_reference: bool
    """The KL term is on, so the rollout also runs the reference policy."""
    engine: RolloutEngine | None
    owns_engine: bool
    """The run started its engine (and closes it); a caller's engine stays open."""
    positions: PositionTree | None = None
    """advantage=exact: every position of the game tree, asked at each update instead of a rollout."""

    def save(self, directory: Path, envs: dict[str, Any] | None = None) -> None:
        """Everything ``--resume`` needs into ``directory``; ``envs``: the envs' state to write instead of now's."""
        envs = envs if envs is not None else self.stepper.state_dict()
        save_checkpoint(directory, self.ac, self.optimizer, self.scheduler, self.generator, self.counters,
                        self.next_done, envs)  # fmt: skip

    def checkpoint(self, envs: dict[str, Any] | None = None) -> Path:
        """Write ``checkpoints/step_N`` now (atomically), prune the old ones, tell the callbacks."""
        config = self.config
        return training.checkpointed(
            self.run, self.callbacks, self.counters, config.keep_checkpoints, lambda d: self.save(d, envs)
        )

    def close(self) -> None:
        self.stepper.close()
        if self.engine is not None and self.owns_engine:
            self.engine.close()


def start_session(
    config: PPOLoRAConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str,
    sampler: TaskSampler | None, rollout_engine: RolloutEngine | None,
) -> Session:  # fmt: skip
    """Check what can be checked before a model loads, then build (or resume) everything the loop needs."""
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
    if config.eval_exact or config.advantage == "exact":
        check_exact_env(env)  # one line now, not after the first rollout
    if config.advantage == "exact" and sampler is not None:
        raise ConfigError("advantage=exact walks one game's whole tree: it takes no curriculum (use advantage=group)")
    positions = PositionTree(env) if config.advantage == "exact" else None
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
    optimizer = torch.optim.AdamW(
        ac.trainable_parameters(), lr=config.peak_learning_rate, weight_decay=config.weight_decay
    )
    # The schedule is over the updates that train the policy: value warm-up updates neither count nor step it.
    per_update = len(positions) if positions is not None else config.rollout_size  # exact: a step per position
    total_updates = max(1, math.ceil(config.total_steps / per_update) - config.value_warmup_updates)
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
    return Session(config, env, run, callbacks, agent, sampler, traits, strategy, ac, optimizer, scheduler, generator,
                   stepper, counters, next_done, with_reference, engine, owns_engine=rollout_engine is None,
                   positions=positions)  # fmt: skip


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
