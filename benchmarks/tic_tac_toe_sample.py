"""The tic-tac-toe sample the exact update's benchmarks time (frozen_rows_together.py, read_positions.py): positions
spread evenly over the game tree, and the model that an ``advantage=exact`` run asks about them. A sibling module:
the benchmarks run as ``python benchmarks/NAME.py``, which puts this folder on ``sys.path``."""

from __future__ import annotations

import argparse
from typing import Any

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import cache_common_rules
from llm_gym.training.position_tree import PositionTree

ENV = "OpenSpiel-tic_tac_toe-v0"


def spread_positions(count: int) -> list[tuple[Any, dict[str, Any]]]:
    """``count`` (observation, info) pairs taken at even steps through the tree's positions with a choice to make
    (more than one legal action: the ones an exact update asks about)."""
    choosing = [(o, i) for o, i in PositionTree(EnvConfig(ENV)).positions if len(i["legal_actions"]) > 1]
    return choosing[:: max(1, len(choosing) // count)][:count]


def exact_model(
    args: argparse.Namespace, positions: list[tuple[Any, dict[str, Any]]], dtype: str
) -> tuple[PPOLoRAConfig, ActorCritic]:
    """The model and config of an exact run (``args.model``, ``args.trainable_layers``; no frozen-layer store, so
    every arm computes what it times), with the rules text of ``positions`` cached as a shared prefix."""
    config = PPOLoRAConfig(model=args.model, dtype=dtype, trainable_layers=args.trainable_layers,
                           advantage="exact", frozen_cache_mb=0, progress=False)  # fmt: skip
    ac = ActorCritic(config, positions[0][1]["instructions"])
    cache_common_rules(ac, [info for _, info in positions])
    return config, ac
