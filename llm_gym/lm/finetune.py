"""Supervised fine-tuning with the loss on the answer tokens only, shared by ``reflection`` (verified corrections)
and ``sft`` (demonstrations).

An example is a prompt (the env's rules + the observation, exactly as the policy sees it when acting) and an
answer (the corrected action's name followed by the chat template's end-of-answer token: exactly the string score
mode rates, so training it raises that action's probability where the model acts). Prompt tokens, image tokens
and padding get the label -100, so nothing but the answer is learnt. Nothing is truncated: an image's tokens stay
whole (a prompt longer than the model's context is an error, not a silent cut).

The encoder of an example comes from the model side (reflection's ``ReflectionModel``, sft's ``DemoEncoder``):
text models give token ids, image+text models also ``pixel_values`` (and ``pixel_attention_mask``). ``reflection``
trains with :func:`train_answers` (a full forward per step: it also trains image+text and fully fine-tuned
models); ``sft`` feeds the same examples, split by :func:`prompt_and_answer`, to ``ppo_lora``'s split forward,
which computes the same loss (a test checks they agree) with the frozen layers run once per example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from llm_gym.lm.prompts import Turns

IGNORE = -100


@dataclass(frozen=True)
class Example:
    """One training example."""

    instructions: str
    """The env's rules (the system message)."""
    observation: Any
    """What the policy saw (text or ``{"image", "text"}``)."""
    answer: str
    """The corrected action's name."""
    turns: Turns = ()
    """The episode's earlier (observation text, move) pairs the policy saw before ``observation`` (``history=K``)."""


@dataclass
class Encoded:
    """An example as model inputs."""

    input_ids: list[int]
    labels: list[int]
    """-100 everywhere but the answer tokens."""
    extras: dict[str, torch.Tensor]
    """Per-example image tensors (batch dimension 1), empty for text models."""


def answer_only_labels(prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> Encoded:
    """Prompt followed by answer; only the answer carries labels."""
    return Encoded([*prompt_ids, *answer_ids], [IGNORE] * len(prompt_ids) + list(answer_ids), {})


def prompt_and_answer(example: Encoded) -> tuple[list[int], list[int]]:
    """The prompt tokens (label -100) and the answer tokens (labelled) of an example."""
    start = next((i for i, label in enumerate(example.labels) if label != IGNORE), len(example.labels))
    return example.input_ids[:start], example.input_ids[start:]


def collate(batch: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors; image tensors padded along the image axis with zeros (the Idefics3 family drops
    all-zero images as padding)."""
    width = max(len(e.input_ids) for e in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, example in enumerate(batch):
        n = len(example.input_ids)
        input_ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.tensor(example.labels)
        attention[row, :n] = 1
    tensors = {"input_ids": input_ids, "labels": labels, "attention_mask": attention}
    for key in batch[0].extras:
        parts = [e.extras[key] for e in batch]
        images = max(p.shape[1] for p in parts)
        padded = []
        for part in parts:
            if part.shape[1] < images:
                filler = torch.zeros((1, images - part.shape[1], *part.shape[2:]), dtype=part.dtype)
                part = torch.cat([part, filler], dim=1)
            padded.append(part)
        tensors[key] = torch.cat(padded, dim=0)
    return tensors


def answer_loss(model: Any, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the answer tokens of the batch (labels shifted by one: token t predicts t + 1)."""
    device = next(p for p in model.parameters()).device
    inputs = {k: v.to(device) for k, v in tensors.items() if k != "labels"}
    logits = model(**inputs, use_cache=False).logits
    labels = tensors["labels"].to(device)[:, 1:]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE
    )


@dataclass(frozen=True)
class TrainSettings:
    """How :func:`train_answers` trains."""

    epochs: int
    batch_size: int
    learning_rate: float
    weight_decay: float
    max_grad_norm: float
    seed: int


def train_answers(
    model: Any,
    examples: Sequence[Encoded],
    pad_id: int,
    settings: TrainSettings,
    on_step: Callable[[int, float], None] | None = None,
    compute: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> list[float]:
    """AdamW over the model's trainable parameters on ``examples``; returns the loss of every step. ``compute``: the
    context each forward runs in (a LoRA model's :class:`~llm_gym.lm.adapter_compute.AdapterCompute`)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not examples or not params:
        return []
    optimizer = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    generator = torch.Generator().manual_seed(settings.seed)
    losses: list[float] = []
    model.train()
    try:
        for _ in range(settings.epochs):
            order = torch.randperm(len(examples), generator=generator).tolist()
            for start in range(0, len(order), settings.batch_size):
                batch = [examples[i] for i in order[start : start + settings.batch_size]]
                with compute():
                    loss = answer_loss(model, collate(batch, pad_id))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
                optimizer.step()
                losses.append(float(loss.detach()))
                if on_step:
                    on_step(len(losses), losses[-1])
    finally:
        model.eval()
    return losses
