"""Bench suite files for tests, written from parts: a test names what its suite is about (its description, envs and
entries) and shares the tables every small suite repeats (the held-out split, tic-tac-toe against a random player,
the random baseline) instead of copying their TOML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_gym.bench.entries import canonical_json, env_hash
from llm_gym.bench.store import EpisodeRow, EpisodeStore
from llm_gym.bench.suite import Suite, SuiteEnv


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


def store_draws(
    store: EpisodeStore, bench: Suite, env: SuiteEnv, name: str, entry_hash: str, config: dict[str, Any]
) -> None:
    """Store every episode ``bench`` asks of agent entry ``name`` (the agent of that name) on ``env``, each a one-move
    draw, under the identity ``entry_hash`` and its ``config``: a store written before the agent's config changed,
    for the tests of which identity a later run keeps."""
    reads_text = True  # the agents these tests store (lm, sft) read the observation text
    store.add_entry(name, entry_hash, name, config, None, None, {"cpus": 1})
    for spec in bench.episodes():
        if spec.entry != name or spec.env_label != env.label:
            continue
        store.add(
            EpisodeRow(
                suite=bench.name, split=spec.split, entry=name, entry_hash=entry_hash, agent=name,
                checkpoint_hash=None, env_label=env.label, game=env.game, env_id=env.env_id,
                env_args=canonical_json(dict(env.args)), env_hash=env_hash(env, reads_text), task_id=spec.task_id,
                seed=spec.seed, episode_return=0.0, raw_return=0.0, score=0.5, length=1, truncated=False,
                invalid_actions=0, decisions=1, tokens=None, wall_seconds=0.1, llm_gym_version="0.1.0",
            )
        )  # fmt: skip


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
