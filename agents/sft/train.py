"""The ``sft`` training loop, top to bottom: load and split the demos, build ``ppo_lora``'s actor-critic (LoRA on the
top layers, value head), evaluate the untrained model greedily, then epochs of answer-only cross-entropy (plus the
value head's warm-up on the demos' returns-to-go) -> validation loss -> greedy evaluation -> checkpoint.

The loss runs through ``ppo_lora``'s split forward: the frozen layers' output of every demo is computed once and
reused by every epoch (and the system prompt's KV cache is shared), so an epoch costs the trainable layers only;
``frozen_cache`` keeps that output on disk, so a resume does not compute it again.
Each demo is a prompt and its answer as a continuation; only the answer tokens are predicted, which is the same
cross-entropy as :func:`llm_gym.lm.finetune.answer_loss` over the -100-labelled example (a test checks it).
Checkpoints have ``ppo_lora``'s layout (``adapter/``, ``value_head.pt``), and the evaluation is ``ppo_lora``'s, on
its held-out seeds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.evaluation import evaluate
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE, ActorCritic
from llm_gym.agents.ppo_lora.session import initial_actor_critic
from llm_gym.agents.ppo_lora.strategies import strategy_for
from llm_gym.agents.ppo_lora.update import padded_hidden
from llm_gym.agents.sft import frozen_cache
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import (
    DemoEncoder,
    DemoExample,
    check_lengths,
    load_records,
    split_episodes,
    value_targets,
)
from llm_gym.agents.sft.report import EvaluationRecord, print_report, write_plot
from llm_gym.callbacks import Callback
from llm_gym.demos.format import DemoRecord
from llm_gym.envs.catalog import EnvTraits
from llm_gym.errors import CheckpointError, ConfigError, UnsupportedEnvError
from llm_gym.lm.finetune import prompt_and_answer
from llm_gym.lm.runtime import configure_threads
from llm_gym.lm.scoring import choice_table
from llm_gym.rl import cosine_schedule
from llm_gym.runs import Run
from llm_gym.training import loop as training

STATE_FILE = "sft_training.pt"
"""In an sft checkpoint besides ppo_lora's files: optimizer, scheduler, RNG, counters and the epoch (--resume)."""


class Batches:
    """The demos of one split with each one's frozen-layer output, computed once, or read from ``cache`` (a
    directory and :func:`~llm_gym.agents.sft.frozen_cache.bottom_fingerprint`; written there when not found)."""

    def __init__(
        self,
        ac: ActorCritic,
        examples: Sequence[DemoExample],
        batch_size: int,
        with_choices: bool = False,
        merge_repeats: bool = True,
        cache: tuple[Path, str] | None = None,
    ) -> None:
        self.examples = list(examples)
        self.with_choices = with_choices
        self.merge_repeats = merge_repeats
        self.parts = [prompt_and_answer(e.encoded) for e in self.examples]
        # Demos repeat decisions (every game starts from the same board): each distinct prompt + answer runs once
        # and its copies share the tensor (the rows hold the answer's fed-in tokens too, or every choice's).
        # Per demo, the first demo with its prompt + answer (+ choices): the copies share its row here and in repeats().
        first: dict[tuple[Any, ...], int] = {}
        self.first_copy = [first.setdefault(self._key(i), i) for i in range(len(self.parts))]
        distinct = sorted(set(first.values()))
        chunks = [distinct[start : start + batch_size] for start in range(0, len(distinct), batch_size)]

        @torch.no_grad()
        def frozen_pass() -> list[torch.Tensor]:
            rows = []
            for index in chunks:
                batch = self._pack(ac, index)
                hidden = ac.bottom(batch)
                rows += [hidden[row, : int(length)].clone() for row, length in enumerate(batch.row_lengths)]
            return rows

        if cache is None or ac.split_layer == 0:  # no frozen layers: the pass is the embedding lookup
            rows = frozen_pass()
        else:  # packed once more for the rows' lengths only: what a cache file must hold
            lengths = [int(n) for index in chunks for n in self._pack(ac, index).row_lengths]
            directory, fingerprint = cache
            described = [(*self._key(i), self.examples[i].uses_prefix) for i in distinct]
            key = frozen_cache.rows_key(fingerprint, described, batch_size)
            rows = frozen_cache.load_or_compute(directory, key, lengths, frozen_pass, ac.device)
        computed = dict(zip(distinct, rows, strict=True))
        self.hidden = [computed[i] for i in self.first_copy]

    def _key(self, i: int) -> tuple[Any, ...]:
        prompt, answer = self.parts[i]
        return (tuple(prompt), tuple(answer), self.examples[i].choices if self.with_choices else ())

    def __len__(self) -> int:
        return len(self.examples)

    def _pack(self, ac: ActorCritic, index: Sequence[int]) -> Any:
        return ac.pack(
            [self.parts[i][0] for i in index],
            [self.examples[i].uses_prefix for i in index],
            [self.examples[i].choices if self.with_choices else [self.parts[i][1]] for i in index],
        )

    def answer_tokens(self, index: Sequence[int]) -> int:
        """Answer tokens of these demos (what the answer loss averages over)."""
        return sum(len(self.parts[i][1]) for i in index)

    def repeats(self, index: Sequence[int]) -> list[list[int]]:
        """The demos of ``index`` grouped by distinct prompt + answer (+ choices), in first-seen order. A group's
        demos give the trainable layers the same input and the same labels, so one row run once and counted
        ``len(group)`` times is exactly their loss and gradient (small games repeat decisions: Kuhn poker's demos
        hold about 10 distinct ones, so a batch of 16 runs about 7.5 rows). Without ``merge_repeats``: groups of one."""
        if not self.merge_repeats:
            return [[i] for i in index]
        groups: dict[int, list[int]] = {}
        for i in index:
            groups.setdefault(self.first_copy[i], []).append(i)
        return list(groups.values())

    def losses(
        self,
        ac: ActorCritic,
        index: Sequence[int],
        config: SFTConfig,
        train: bool,
        share: tuple[int, int] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Answer cross-entropy (mean over the batch's answer tokens), the demo answers' mean probability, and the
        value head's MSE to the returns-to-go. With ``share`` = (answer tokens, demos) of the whole batch that these
        demos are a micro-batch of, ``loss`` is this micro-batch's part of the batch's loss (the parts sum to it)."""
        groups = self.repeats(index)
        rows = [group[0] for group in groups]
        batch = self._pack(ac, rows)
        hidden = padded_hidden([self.hidden[i] for i in rows], batch.input_ids.shape[1]).to(ac.device)
        out, values = ac.top(hidden, batch, "train" if train else "rollout")
        count = torch.tensor([len(group) for group in groups], dtype=values.dtype, device=values.device)
        # A group's demos share the value prediction but not the return-to-go: sum_j (v - t_j)^2 / 2 is
        # count * (v - mean t)^2 / 2 plus the spread of the targets around their mean (no gradient).
        scaled = [[config.reward_scale * self.examples[i].return_to_go for i in group] for group in groups]
        means = [sum(t) / len(t) for t in scaled]
        spread = sum((x - m) ** 2 for t, m in zip(scaled, means, strict=True) for x in t) / 2
        mean = torch.tensor(means, dtype=values.dtype, device=values.device)
        squared_sum = (count * 0.5 * (values - mean) ** 2).sum() + spread
        tokens, demos = share or (self.answer_tokens(index), len(index))
        if self.with_choices:
            # Each row holds every legal action as a continuation; the answer is one of them.
            answer = torch.tensor([self.examples[i].answer_index for i in rows], device=values.device)
            table = choice_table(out.seq_logprobs, batch.seq_row, len(rows))
            answer_seq = table.gather(1, answer[:, None]).squeeze(1)
            choice_logp = torch.log_softmax(table, dim=-1)
            right = torch.zeros_like(choice_logp, dtype=torch.bool)  # what the choice loss counts as right
            for row, i in enumerate(rows):
                example = self.examples[i]
                right[row, list(example.best) if config.choice_target == "best" else [example.answer_index]] = True
            choice_nll = -torch.logsumexp(choice_logp.masked_fill(~right, float("-inf")), dim=1)
        else:
            answer_seq = out.seq_logprobs
        answer_sum = (count * answer_seq).sum()
        loss = -answer_sum / tokens + config.value_coef * squared_sum / demos
        losses = {"answer_loss": -answer_sum / self.answer_tokens(index),
                  "answer_prob": (count * answer_seq.exp()).sum() / len(index),
                  "value_loss": squared_sum / len(index)}  # fmt: skip
        if self.with_choices:
            chosen = right.gather(1, choice_logp.argmax(1, keepdim=True)).squeeze(1)
            loss = loss + config.choice_loss_coef * (count * choice_nll).sum() / demos
            losses |= {"choice_loss": (count * choice_nll).sum() / len(index),
                       "choice_accuracy": (count * chosen).sum() / len(index)}  # fmt: skip
        return {"loss": loss, **losses}


@torch.no_grad()
def validate(ac: ActorCritic, data: Batches, config: SFTConfig) -> dict[str, float]:
    """Mean validation losses over the held-out demos (weighted by batch size)."""
    sums: dict[str, float] = {}
    for start in range(0, len(data), config.batch_size):
        index = list(range(start, min(start + config.batch_size, len(data))))
        for key, value in data.losses(ac, index, config, train=False).items():
            sums[key] = sums.get(key, 0.0) + float(value) * len(index)
    return {f"val/{k}": v / len(data) for k, v in sums.items()} if len(data) else {}


def train(config: SFTConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str) -> dict[str, Any]:
    """Train on ``config.demos`` and return the summary."""
    # -- setup -------------------------------------------------------------------------------------------------
    configure_threads(config.threads)
    torch.manual_seed(config.seed)
    traits = EnvTraits.probe(env)
    if config.action_mode == "score" and traits.text_actions:
        raise UnsupportedEnvError(f"{env.env_id} takes free text as its action; use --set action_mode=generate")
    records = load_records(config.demos, env.env_id, config.max_demos)
    train_records, val_records = split_episodes(records, config.validation_fraction, config.seed)
    lora = config.as_ppo_lora()
    strategy = strategy_for(lora)
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
        return Batches(ac, examples, config.batch_size, with_choices, merge_repeats, cache)

    # Repeated demos run once per batch; with LoRA dropout each copy would draw its own mask, so training keeps them.
    train_data, val_data = batches(train_records, config.lora_dropout == 0), batches(val_records, True)
    params = ac.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(len(train_data) / config.batch_size)
    total_steps = config.epochs * steps_per_epoch
    warmup = min(config.warmup_steps, total_steps // 5)  # a short run still reaches its peak learning rate
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: cosine_schedule(s, total_steps, 1.0, config.min_lr_ratio, warmup=warmup)
    )
    generator = torch.Generator().manual_seed(config.seed)
    counters, evaluations = training.Counters(), []
    epoch, position, epoch_start, sums = 0, 0, generator.get_state(), {}
    if resume:
        epoch, evaluations, (position, epoch_start, sums) = _load_state(
            resume, ac, optimizer, scheduler, generator, counters
        )
        ac.refresh()
    training.training_started(callbacks, env.env_id, config, counters)

    def save(directory: Path) -> None:
        ac.save(directory)
        torch.save(
            {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "generator": generator.get_state(), "counters": counters.state_dict(), "epoch": epoch,
             "position": position, "epoch_start": epoch_start, "epoch_sums": sums,
             "evaluations": [e.as_dict() for e in evaluations]},
            directory / STATE_FILE,
        )  # fmt: skip

    # ppo_lora's evaluation, scaled with this run (llm_gym.training.loop.scaled_eval_steps): its budget is the demos it
    # trains on (decisions seen over all epochs), so a small run on few demos does not play whole long games.
    evaluation_config = dataclasses.replace(lora, total_steps=config.epochs * len(train_data))

    def evaluation() -> bool:
        returns, scores = evaluate(
            ac, strategy, env, evaluation_config, run, counters.global_step, traits.renders_frames
        )
        evaluations.append(EvaluationRecord(counters.global_step, epoch, returns, scores))
        return training.evaluated(run, callbacks, counters, returns, scores, save)

    stopped = False
    validation: dict[str, float] | None = None  # of the weights as they are now (the summary reuses it)
    if not resume:
        run.log_scalars(0, validation := validate(ac, val_data, config))
        if config.eval_episodes > 0 and config.eval_at_start:  # the untrained model, on the later evaluations' seeds
            stopped = evaluation()

    # -- epochs ------------------------------------------------------------------------------------------------
    progress = training.progress_bar(config.progress, unit="demos")
    clock = training.Clock(counters)
    with progress:
        task = progress.add_task(f"{agent} {env.env_id}", total=config.epochs * len(train_data), status="",
                                 completed=epoch * len(train_data) + position)  # fmt: skip
        while epoch < config.epochs and not stopped:
            if position:  # resumed inside an epoch: draw the same order again and go on after the last step done
                generator.set_state(epoch_start)
            else:
                epoch_start, sums = generator.get_state(), {}
            order = torch.randperm(len(train_data), generator=generator).tolist()
            ac.model.train()
            try:
                for start in range(position, len(order), config.batch_size):
                    index = order[start : start + config.batch_size]
                    optimizer.zero_grad(set_to_none=True)
                    step_scalars = _accumulate(train_data, ac, index, config)
                    grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    counters.update += 1
                    counters.global_step += len(index)
                    position = start + len(index)
                    step_scalars |= {
                        "train/grad_norm": float(grad_norm),
                        "train/learning_rate": scheduler.get_last_lr()[0],
                    }
                    run.log_scalars(counters.global_step, step_scalars)
                    for key, value in step_scalars.items():
                        sums[key] = sums.get(key, 0.0) + value
                    progress.update(
                        task,
                        advance=len(index),
                        status=f"epoch {epoch + 1} loss {step_scalars['train/answer_loss']:.3f}",
                    )
                    mid_epoch = position < len(order)  # the epoch's end writes its own checkpoint below
                    if config.checkpoint_every and counters.update % config.checkpoint_every == 0 and mid_epoch:
                        training.checkpointed(run, callbacks, counters, config.keep_checkpoints, save)
            finally:
                ac.model.eval()
                ac.refresh()
            epoch, position = epoch + 1, 0
            clock.tick()
            epoch_means = {k.replace("train/", "train_epoch/"): v / steps_per_epoch for k, v in sums.items()}
            validation = validate(ac, val_data, config)
            scalars = epoch_means | validation
            scalars["charts/epoch"] = epoch
            run.log_scalars(counters.global_step, scalars)
            stopped = training.update_done(callbacks, counters, scalars)
            last = stopped or epoch >= config.epochs
            if config.eval_episodes > 0 and (last or (config.eval_every and epoch % config.eval_every == 0)):
                stopped |= evaluation()
            training.checkpointed(run, callbacks, counters, config.keep_checkpoints, save)

    # -- summary -----------------------------------------------------------------------------------------------
    summary = training.base_summary(agent, env.env_id, counters, run)
    summary |= {
        "env_steps": 0,
        "demos": str(Path(config.demos).resolve()),
        "demo_decisions": {"train": len(train_data), "validation": len(val_data)},
        "demo_episodes": {
            "train": len({r.episode for r in train_data.examples}),
            "validation": len({r.episode for r in val_data.examples}),
        },  # fmt: skip
        "examples_seen": counters.global_step,
        "epochs": epoch,
        "model": config.model,
        "action_mode": config.action_mode,
        "validation": validation if validation is not None else validate(ac, val_data, config),
        "evaluations": [e.as_dict() for e in evaluations],
        "plot": str(write_plot(run, evaluations)) if evaluations else None,
    }
    if config.progress:
        print_report(summary, evaluations)
    return training.finished(run, callbacks, counters, summary)


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


def _accumulate(data: Batches, ac: ActorCritic, index: Sequence[int], config: SFTConfig) -> dict[str, float]:
    """Backward of one batch's loss in micro-batches of ``config.micro_batch_size`` (gradients add up to the whole
    batch's); returns the batch's losses (the answer loss per answer token, the others per demo)."""
    share = (data.answer_tokens(index), len(index))
    scalars: dict[str, float] = {}
    groups = data.repeats(index)  # a micro-batch is micro_batch_size distinct rows, however many demos repeat them
    for start in range(0, len(groups), config.micro_batch_size):
        micro = [i for group in groups[start : start + config.micro_batch_size] for i in group]
        losses = data.losses(ac, micro, config, train=True, share=share)
        losses["loss"].backward()
        weights = {"loss": 1.0, "answer_loss": data.answer_tokens(micro) / share[0]}
        for key, value in losses.items():
            weight = weights.get(key, len(micro) / share[1])
            scalars[f"train/{key}"] = scalars.get(f"train/{key}", 0.0) + weight * float(value.detach())
    return scalars


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


__all__ = ["STATE_FILE", "VALUE_HEAD_FILE", "train"]
