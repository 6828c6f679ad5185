"""Bench suite files for tests, written from parts: a test names what its suite is about (its description, envs and
entries) and shares the tables every small suite repeats (the held-out split, tic-tac-toe against a random player,
the random baseline) instead of copying their TOML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class Raw(str):
    """TOML text written as it is: a placeholder a test replaces later (``set = SETTINGS``), or an inline table."""


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (strings, booleans, numbers, lists and inline tables; a :class:`Raw` as it is)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML value for {value!r}")


def table(header: str, **fields: Any) -> str:
    """One TOML table: ``header`` (``[splits.heldout]``, ``[[envs]]``) and its keys, one a line."""
    return f"\n{header}\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in fields.items())


def env(label: str, env_id: str, **fields: Any) -> str:
    """An ``[[envs]]`` table: its label, its registered id and any other keys (``args``, ``game``, ``exact``)."""
    return table("[[envs]]", label=label, id=env_id, **fields)


def entry(name: str, **fields: Any) -> str:
    """An ``[[entries]]`` table: its name and its keys (``agent`` or ``checkpoint``, ``set``, ``envs``, ``splits``)."""
    return table("[[entries]]", name=name, **fields)


def suite(description: str, *tables: str, **settings: Any) -> str:
    """A suite file's text: its description and top-level ``settings`` (episodes, max_steps, num_envs), then
    ``tables`` in order (splits first, then envs and entries)."""
    return table("", description=description, **settings).lstrip("\n") + "".join(tables)


HELDOUT = table("[splits.heldout]", seed=100_000_000)
TRAIN = table("[splits.train]", seed=0)
TTT_RANDOM = env("ttt-random", "OpenSpiel-tic_tac_toe-v0", args={"opponent": "random"}, game="tic_tac_toe")
"""Tic-tac-toe against a random player, grouped with its game on the leaderboard."""
RANDOM = entry("random", agent="random")
SCRIPTED_ON_BREAKOUT = entry("scripted", agent="scripted", envs=["breakout"])


def train_tiny_ttt_run(root: Path) -> Path:
    """A checkpoint for a suite's ``checkpoint = ...`` entry: 16 env steps of ppo_lora (LoRA rank 4) on tic-tac-toe
    with a tiny random model, written under ``root``; returns the run directory."""
    # Imported here: they load torch, which the suites alone do not need.
    from llm_gym.agents.ppo_lora.testing import tiny_config, train
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(root / "model", layers=2, hidden=32)
    config = tiny_config(model, total_steps=16, num_envs=2, num_steps=8, minibatch_size=16, lora_rank=4)
    train(root / "run", "OpenSpiel-tic_tac_toe-v0", config)
    return root / "run"
