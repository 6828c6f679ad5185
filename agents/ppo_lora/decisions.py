"""What one batched decision of ``ppo_lora`` keeps, and what the update reads back: the records :func:`act
<llm_gym.agents.ppo_lora.acting.act>` and the action-mode strategies (:mod:`llm_gym.agents.ppo_lora.strategies`)
pass between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from llm_gym.lm.forward import PackedOutput
from llm_gym.lm.packing import PackedBatch
from llm_gym.lm.prompts import Turns


@dataclass
class Decisions:
    """One batched decision for a list of rows (envs), with what the update needs to recompute it."""

    prompts: list[list[int]]
    uses_prefix: list[bool]
    continuations: list[list[list[int]]]
    """Score mode: every legal action's tokens; generate mode: the one sampled answer."""
    hidden: list[torch.Tensor]
    """Per row, the frozen layers' output for its packed tokens (n_i, H); empty when not kept (evaluation)."""
    actions: list[Any]
    """What each env is stepped with: an action id (score) or the answer text (generate)."""
    choice: torch.Tensor
    """(rows,) index of the chosen continuation (score mode; 0 in generate mode)."""
    logprob: torch.Tensor
    """(rows,) log pi(action): the chosen choice's (score) or the answer's summed token log-probs (generate)."""
    token_logprobs: list[torch.Tensor]
    """generate mode: per row, each answer token's log-prob (empty in score mode)."""
    reference: list[torch.Tensor]
    """Per row, the reference's log-probs: over the choices (score) or of each answer token (generate); empty
    tensors when the KL term is off."""
    values: torch.Tensor
    """(rows,) value estimates."""
    engine_logprob: torch.Tensor
    """(rows,) log pi(action) as the rollout engine computed it when it picked the action (nan without one)."""
    probs: list[torch.Tensor]
    """Score mode: per row, the policy's probability of each legal action, in option order (what the rollout's
    action statistics are made of); generate mode: empty tensors."""


@dataclass
class Sampling:
    """How a decision is taken: greedy (evaluation) or sampled with ``generator`` (rollout)."""

    greedy: bool
    generator: torch.Generator


@dataclass
class Forward:
    """The policy's packed forward over the distinct rows of a batch of decisions, and their values."""

    out: PackedOutput
    values: torch.Tensor
    batch: PackedBatch
    inverse: torch.Tensor
    """Per decision, its row in the forward (decisions with the same prompt and continuations share one)."""


@dataclass
class Stored:
    """A minibatch of stored decisions and their targets, as :meth:`Strategy.losses` reads them."""

    choice: list[int]
    logprob: list[float]
    token_logprobs: list[torch.Tensor]
    reference: list[torch.Tensor]
    probs: list[torch.Tensor]
    """Score mode: per decision, the rollout policy's probability of each choice."""
    advantages: torch.Tensor
    returns: torch.Tensor
    old_values: torch.Tensor


Continuations = list[list[list[int]]]
"""Per row, the token sequences scored for it."""
Choice = tuple[list[Any], torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]
"""(actions, chosen continuation per row, log pi(action) per row, per-row token log-probs, per-row probability of
each legal action in option order (score mode; empty tensors in generate mode))."""


@dataclass
class Prompts:
    """What each row's prompt is made of, for an engine that builds the same prompts itself."""

    observations: list[Any]
    rules: list[str]
    turns: list[Turns]


@dataclass
class EnginePick:
    """The rollout engine's decision for every row: what each row may do, the continuations the training model
    recomputes, the chosen one (score mode; 0 in generate mode) and its log-probability under the engine."""

    options: list[Any]
    continuations: Continuations
    choice: torch.Tensor
    logprob: torch.Tensor
