"""A tiny random Llama with a character-level ChatML tokenizer, built once per session (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    # A wide initialisation makes the random model's distributions far from uniform, so greedy decoding and
    # sampling produce varied text and the scores of different actions differ clearly.
    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=3, init_std=0.5)


@pytest.fixture(scope="session")
def tiny_lm(tiny_model_dir: Path):
    import torch

    from llm_gym.lm.models import load_causal_lm

    torch.manual_seed(0)
    return load_causal_lm(str(tiny_model_dir), dtype="float32", device="cpu")
