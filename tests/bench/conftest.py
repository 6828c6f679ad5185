"""Small suites written per test (real envs, real agents, a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_SUITE = """
description = "two cheap envs, two entries"
episodes = 3
max_steps = 20
num_envs = 2

[splits.heldout]
seed = 100_000_000

[splits.train]
seed = 0

[[envs]]
label = "ttt-random"
id = "OpenSpiel-tic_tac_toe-v0"
args = { opponent = "random" }
game = "tic_tac_toe"

[[envs]]
label = "breakout"
id = "LLMBreakout-text-v0"
episodes = 2
game = "breakout"

[[entries]]
name = "random"
agent = "random"

[[entries]]
name = "scripted"
agent = "scripted"
envs = ["breakout"]
"""


@pytest.fixture
def tiny_suite(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SUITE)
    return path
