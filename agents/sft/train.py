"""The ``sft`` training loop, top to bottom: load and split the demos, build ``ppo_lora``'s actor-critic (LoRA on the
top layers, value head), evaluate the untrained model greedily, then epochs of answer-only cross-entropy (plus the
value head's warm-up on the demos' returns-to-go) -> validation loss -> greedy evaluation -> checkpoint.

The loss runs through ``ppo_lora``'s split forward: the frozen layers' output of every demo is computed once and
reused by every epoch (and the system prompt's KV cache is shared), so an epoch costs the trainable layers only;
``frozen_cache`` keeps that output on disk, so a resume does not compute it again (:mod:`~llm_gym.agents.sft.batches`).
Each demo is a prompt and its answer as a continuation; only the answer tokens are predicted, which is the same
cross-entropy as :func:`llm_gym.lm.finetune.answer_loss` over the -100-labelled example (a test checks it).
Checkpoints have ``ppo_lora``'s layout (``adapter/``, ``value_head.pt``), and the evaluation is ``ppo_lora``'s, on
its held-out seeds. What the run holds and how it starts or resumes: :mod:`~llm_gym.agents.sft.session`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from rich.progress import Progress, TaskID

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.evaluation import evaluate
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE
from llm_gym.agents.sft.batches import accumulate, validate
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.report import EvaluationRecord, print_report, write_plot
from llm_gym.agents.sft.session import STATE_FILE, Session, start_session
from llm_gym.callbacks import Callback
from llm_gym.runs import Run
from llm_gym.training import loop as training


def train(config: SFTConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str) -> dict[str, Any]:
    """Train on ``config.demos`` and return the summary."""
    s = start_session(config, env, run, callbacks)
    training.training_started(callbacks, env.env_id, config, s.counters)
    stopped = False
    validation: dict[str, float] | None = None  # of the weights as they are now (the summary reuses it)
    if not run.resumed_from:
        run.log_scalars(0, validation := validate(s.ac, s.val_data, config))
        if config.eval_episodes > 0 and config.eval_at_start:  # the untrained model, on the later evaluations' seeds
            stopped = evaluate_now(s)
    progress = training.progress_bar(config.progress, unit="demos")
    clock = training.Clock(s.counters)
    with progress:
        task = progress.add_task(f"{agent} {env.env_id}", total=config.epochs * len(s.train_data), status="",
                                 completed=s.epoch * len(s.train_data) + s.position)  # fmt: skip
        while s.epoch < config.epochs and not stopped:
            train_epoch(s, progress, task)  # -- the epoch's updates (and checkpoints inside it)
            s.epoch, s.position = s.epoch + 1, 0
            clock.tick()
            validation = validate(s.ac, s.val_data, config)  # -- validation loss, epoch means
            scalars = epoch_scalars(s, validation)
            run.log_scalars(s.counters.global_step, scalars)
            stopped = training.update_done(callbacks, s.counters, scalars)
            last = stopped or s.epoch >= config.epochs
            if config.eval_episodes > 0 and (last or (config.eval_every and s.epoch % config.eval_every == 0)):
                stopped |= evaluate_now(s)  # -- greedy evaluation
            training.checkpointed(run, callbacks, s.counters, config.keep_checkpoints, s.save)  # -- checkpoint
    return finish(s, agent, validation)


def train_epoch(s: Session, progress: Progress, task: TaskID) -> None:
    """One epoch's updates over the demos in a shuffled order: each batch's backward in micro-batches, gradient
    clipping, an optimizer step, its scalars logged; a checkpoint every ``checkpoint_every`` updates inside it."""
    config, counters = s.config, s.counters
    if s.position:  # resumed inside an epoch: draw the same order again and go on after the last step done
        s.generator.set_state(s.epoch_start)
    else:
        s.epoch_start, s.sums = s.generator.get_state(), {}
    order = torch.randperm(len(s.train_data), generator=s.generator).tolist()
    s.ac.model.train()
    try:
        for start in range(s.position, len(order), config.minibatch_size):
            index = order[start : start + config.minibatch_size]
            s.optimizer.zero_grad(set_to_none=True)
            step_scalars = accumulate(s.train_data, s.ac, index, config)
            grad_norm = torch.nn.utils.clip_grad_norm_(s.params, config.max_grad_norm)
            s.optimizer.step()
            s.scheduler.step()
            counters.update += 1
            counters.global_step += len(index)
            s.position = start + len(index)
            step_scalars |= {"train/grad_norm": float(grad_norm), "train/learning_rate": s.scheduler.get_last_lr()[0]}
            s.run.log_scalars(counters.global_step, step_scalars)
            for key, value in step_scalars.items():
                s.sums[key] = s.sums.get(key, 0.0) + value
            status = f"epoch {s.epoch + 1} loss {step_scalars['train/answer_loss']:.3f}"
            progress.update(task, advance=len(index), status=status)
            mid_epoch = s.position < len(order)  # the epoch's end writes its own checkpoint
            if config.checkpoint_every and counters.update % config.checkpoint_every == 0 and mid_epoch:
                training.checkpointed(s.run, s.callbacks, counters, config.keep_checkpoints, s.save)
    finally:
        s.ac.model.eval()
        s.ac.refresh()


def epoch_scalars(s: Session, validation: dict[str, float]) -> dict[str, float]:
    """The epoch's mean step scalars (``train_epoch/``), the validation losses and the epoch's number."""
    epoch_means = {k.replace("train/", "train_epoch/"): v / s.steps_per_epoch for k, v in s.sums.items()}
    return epoch_means | validation | {"charts/epoch": s.epoch}


def evaluate_now(s: Session) -> bool:
    """``ppo_lora``'s greedy evaluation of the model as it is now; False when a callback asks to stop."""
    returns, scores = evaluate(
        s.ac, s.strategy, s.env, s.evaluation_config, s.run, s.counters.global_step, s.traits.renders_frames
    )
    s.evaluations.append(EvaluationRecord(s.counters.global_step, s.epoch, returns, scores))
    return training.evaluated(s.run, s.callbacks, s.counters, returns, scores, s.save)


def finish(s: Session, agent: str, validation: dict[str, float] | None) -> dict[str, Any]:
    """The run's summary (the demos, the epochs, the last validation, every evaluation, the plot), and the report."""
    config = s.config
    summary = training.base_summary(agent, s.env.env_id, s.counters, s.run)
    summary |= {
        "env_steps": 0,
        "demos": str(Path(config.demos).resolve()),
        "demo_decisions": {"train": len(s.train_data), "validation": len(s.val_data)},
        "demo_episodes": {
            "train": len({r.episode for r in s.train_data.examples}),
            "validation": len({r.episode for r in s.val_data.examples}),
        },  # fmt: skip
        "examples_seen": s.counters.global_step,
        "epochs": s.epoch,
        "model": config.model,
        "action_mode": config.action_mode,
        "validation": validation if validation is not None else validate(s.ac, s.val_data, config),
        "evaluations": [e.as_dict() for e in s.evaluations],
        "plot": str(write_plot(s.run, s.evaluations)) if s.evaluations else None,
    }
    if config.progress:
        print_report(summary, s.evaluations)
    return training.finished(s.run, s.callbacks, s.counters, summary)


__all__ = ["STATE_FILE", "VALUE_HEAD_FILE", "train"]
