"""What an ``sft`` run holds between its steps, and how it starts: the demos loaded, split and encoded as batches,
``ppo_lora``'s actor-critic, the optimizer and schedule, and where the epochs are; on ``--resume``, all of it as the
checkpoint left it (inside an epoch too: the epoch's order is drawn again from the saved generator state).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.session import initial_actor_critic
from llm_gym.agents.ppo_lora.strategies import Strategy, strategy_for
from llm_gym.agents.sft import frozen_cache
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder, check_lengths, load_records, split_episodes, value_targets
from llm_gym.agents.sft.report import EvaluationRecord
from llm_gym.callbacks import Callback
from llm_gym.demos.format import DemoRecord
from llm_gym.envs.catalog import EnvTraits
from llm_gym.errors import CheckpointError, ConfigError, UnsupportedEnvError
from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import cosine_schedule
from llm_gym.runs import Run
from llm_gym.training import loop as training

STATE_FILE = "sft_training.pt"
"""In an sft checkpoint besides ppo_lora's files: optimizer, scheduler, RNG, counters and the epoch (--resume)."""


@dataclass
class Session:
    """One sft run's state. :meth:`save` writes everything ``--resume`` needs into a checkpoint folder."""

    config: SFTConfig
    env: EnvConfig
    run: Run
    callbacks: Sequence[Callback]
    ac: ActorCritic
    strategy: Strategy
    traits: EnvTraits
    train_data: Batches
    val_data: Batches
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    generator: torch.Generator
    steps_per_epoch: int
    evaluation_config: PPOLoRAConfig
    """ppo_lora's evaluation, scaled with this run (llm_gym.training.loop.scaled_eval_steps): its budget is the demos
    it trains on (decisions seen over all epochs), so a small run on few demos does not play whole long games."""
    epoch_start: torch.Tensor
    """The generator's state before the current epoch's order was drawn."""
    counters: training.Counters = field(default_factory=training.Counters)
    evaluations: list[EvaluationRecord] = field(default_factory=list)
    epoch: int = 0
    position: int = 0
    """Demos of the current epoch's order trained on (a checkpoint inside an epoch resumes after them)."""
    sums: dict[str, float] = field(default_factory=dict)
    """The current epoch's step scalars, summed (the epoch's means are logged at its end)."""

    def save(self, directory: Path) -> None:
        self.ac.save(directory)
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
             "generator": self.generator.get_state(), "counters": self.counters.state_dict(), "epoch": self.epoch,
             "position": self.position, "epoch_start": self.epoch_start, "epoch_sums": self.sums,
             "evaluations": [e.as_dict() for e in self.evaluations]},
            directory / STATE_FILE,
        )  # fmt: skip


def start_session(config: SFTConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback]) -> Session:
    """Load, split and encode the demos, build the model and the optimizer; on ``--resume``, restore them."""
    configure_threads(config.threads)
    torch.manual_seed(config.seed)
    traits = EnvTraits.probe(env)
    if config.action_mode == "score" and traits.text_actions:
        raise UnsupportedEnvError(f"{env.env_id} takes free text as its action; use --set action_mode=generate")
    records = load_records(config.demos, env.env_id, config.max_demos)
    train_records, val_records = split_episodes(records, config.validation_fraction, config.seed)
    lora = config.as_ppo_lora()
    resume = run.resumed_from
    ac = initial_actor_critic(lora, traits.instructions, resume)
    encoder = DemoEncoder(ac.builder, with_end=config.score_with_end or config.action_mode == "generate")
    with_choices = config.choice_loss_coef > 0
    if with_choices:
        _check_choices(config.demos, train_records + val_records, config.action_mode, config.choice_target)

    directory = frozen_cache.cache_dir(config.frozen_cache, run.path)
    cache = (directory, frozen_cache.bottom_fingerprint(ac)) if directory and ac.split_layer else None

    context = int(getattr(ac.model.config, "max_position_embeddings", 0) or 1 << 62)

    def batches(part: list[DemoRecord], merge_repeats: bool) -> Batches:  # whole episodes per split (complete targets)
        targets = value_targets(part, config.value_gamma, config.demos)
        examples = [encoder.encode(r, t) for r, t in zip(part, targets, strict=True)]
        check_lengths(examples, part, context, config.demos)
        return Batches(ac, examples, config.minibatch_size, with_choices, merge_repeats, cache)

    # Repeated demos run once per batch; with LoRA dropout each copy would draw its own mask, so training keeps them.
    train_data, val_data = batches(train_records, config.lora_dropout == 0), batches(val_records, True)
    params = ac.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(len(train_data) / config.minibatch_size)
    total_steps = config.epochs * steps_per_epoch
    warmup = min(config.warmup_updates, total_steps // 5)  # a short run still reaches its peak learning rate
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: cosine_schedule(s, total_steps, 1.0, config.min_lr_ratio, warmup=warmup)
    )
    generator = torch.Generator().manual_seed(config.seed)
    s = Session(
        config, env, run, callbacks, ac, strategy_for(lora), traits, train_data, val_data, params, optimizer,
        scheduler, generator, steps_per_epoch,
        evaluation_config=dataclasses.replace(lora, total_steps=config.epochs * len(train_data)),
        epoch_start=generator.get_state(),
    )  # fmt: skip
    if resume:
        s.epoch, s.evaluations, (s.position, s.epoch_start, s.sums) = _load_state(
            resume, ac, optimizer, scheduler, generator, s.counters
        )
        ac.refresh()
    return s


def _check_choices(path: str, records: Sequence[DemoRecord], action_mode: str, target: str) -> None:
    """The choice loss ranks each demo's answer among its legal actions: every demo must list them (and, for
    ``choice_target=best``, the demonstrator's value of each)."""
    if action_mode != "score":
        raise ConfigError("choice_loss_coef ranks the legal actions as score mode does; it needs action_mode=score")
    missing = sum(1 for r in records if not r.choices)
    if missing:
        raise ConfigError(
            f"choice_loss_coef needs demos that list their legal actions (`choices`); {missing} of {len(records)} "
            f"lines of {path} have none: write the file again with `llm-gym demos`, or set choice_loss_coef=0"
        )
    unvalued = sum(1 for r in records if not r.choice_values)
    if target == "best" and unvalued:
        raise ConfigError(
            f"choice_target=best needs the demonstrator's value of each legal action (`choice_values`); {unvalued} of "
            f"{len(records)} lines of {path} have none (only demonstrators with action values write them, e.g. "
            f"--agent solver): use choice_target=answer"
        )


def _load_state(
    directory: Path, ac: ActorCritic, optimizer: Any, scheduler: Any, generator: torch.Generator,
    counters: training.Counters,
) -> tuple[int, list[EvaluationRecord], tuple[int, torch.Tensor, dict[str, float]]]:  # fmt: skip
    try:  # a file that verifies can still hold the wrong things (rewritten with its manifest): one line
        ac.load_value_head(directory)
        data = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
        training.load_optimizer_state(optimizer, scheduler, data["optimizer"], data["scheduler"])  # --set lr
        generator.set_state(data["generator"])
        restored = training.Counters.from_state_dict(data["counters"])
        evaluations = [EvaluationRecord.from_dict(e) for e in data["evaluations"]]
        # Checkpoints written before mid-epoch checkpoints existed are all at an epoch's end.
        inside = (int(data.get("position", 0)), data.get("epoch_start", generator.get_state()),
                  data.get("epoch_sums", {}))  # fmt: skip
        epoch = int(data["epoch"])
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"cannot resume from {directory}: {type(exc).__name__}: {exc}") from exc
    for name, value in vars(restored).items():
        setattr(counters, name, value)
    return epoch, evaluations, inside
