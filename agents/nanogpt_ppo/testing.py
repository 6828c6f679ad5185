"""nanogpt_ppo runs small enough for a test on two CPU cores: the settings such tests share (``--set`` keys), and
the tiny network the model tests build."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from llm_gym.agents.nanogpt_ppo.model import GPTShape, NanoGPTActorCritic
from llm_gym.agents.nanogpt_ppo.tokenizer import QUERY, CharTokenizer

TINY_SETTINGS: dict[str, Any] = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "mlp_ratio": 2,
    "num_envs": 2,
    "num_steps": 32,
    "minibatch_size": 32,
    "update_epochs": 2,
    "eval_episodes": 1,
    "eval_max_steps": 40,
    "threads": 1,
    "progress": False,
}
"""A one-layer, 16-wide model, 2 envs x 32 steps per update, one short evaluation episode, no progress bar."""


def tiny_network(**shape: Any) -> NanoGPTActorCritic:
    """A 2-block, 2-head, 16-wide network over the character tokenizer (line/column positions, query summary, 48
    tokens, 4 actions; ``shape`` overrides any :class:`GPTShape` field), seeded, in float64 (so "unchanged" can be
    checked to rounding error) and in eval mode."""
    tokenizer = CharTokenizer()
    base = GPTShape(
        vocab_size=tokenizer.vocab_size,
        context=48,
        n_layer=2,
        n_head=2,
        n_embd=16,
        mlp_ratio=2,
        n_actions=4,
        positions="line_column",
        newline_id=int(tokenizer.encode("\n")[0]),
        query_summary=True,
        query_id=QUERY,
    )
    torch.manual_seed(0)
    return NanoGPTActorCritic(dataclasses.replace(base, **shape)).double().eval()
