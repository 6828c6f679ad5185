"""Fixtures shared by the agent tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random causal LM (2 layers, width 64), saved once per module. Tests with other needs (say, a
    near-uniform start) define their own fixture of this name, which takes precedence."""
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=64, init_std=0.1)


@pytest.fixture(scope="module")
def kuhn_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 games of Kuhn poker by the exact best response against random play (real OpenSpiel), written by
    ``record_demos`` as ``llm-gym demos`` writes them: about 10 distinct decisions, each repeated, whose copies end
    with different returns."""
    from llm_gym.agent import EnvConfig
    from llm_gym.demos.record import record_demos
    from llm_gym.plugins import get_agent

    env = EnvConfig("OpenSpiel-kuhn_poker-v0")
    out = tmp_path_factory.mktemp("demos") / "kuhn.jsonl"
    record_demos(get_agent("best_response")().policy(env), env, 24, out, source={"agent": "best_response"})
    return out
