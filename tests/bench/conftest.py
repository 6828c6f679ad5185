"""Small suites written per test (real envs, real agents, a real SQLite file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_suites import HELDOUT, RANDOM, SCRIPTED_ON_BREAKOUT, TRAIN, TTT_RANDOM, env, suite  # tests/bench_suites.py

TINY_SUITE = suite(
    "two cheap envs, two entries",
    HELDOUT,
    TRAIN,
    TTT_RANDOM,
    env("breakout", "LLMBreakout-text-v0", episodes=2, game="breakout"),
    RANDOM,
    SCRIPTED_ON_BREAKOUT,
    episodes=3,
    max_steps=20,
    num_envs=2,
)


@pytest.fixture
def tiny_suite(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SUITE)
    return path
