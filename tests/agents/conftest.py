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
