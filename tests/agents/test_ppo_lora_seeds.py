"""``init_seed`` takes the starting policy's random draws (the fresh LoRA, the value head, the calibration states)
apart from ``seed`` (the envs, the sampled actions, the minibatch order): runs with the same starting seed start
from the same weights and offsets whatever their seed, and runs with the same seed gather the same experience
whatever their init_seed. Runs train at learning rate 0, so their checkpoints hold the starting draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent
from llm_gym.agents.ppo_lora.calibration import ACTION_BIAS_FILE
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, VALUE_HEAD_FILE
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.callbacks import Callback
from llm_gym.config import to_dict
from llm_gym.runs import Run

BREAKOUT = "LLMBreakout-text-v0"
KUHN = "OpenSpiel-kuhn_poker-v0"


class Metrics(Callback):
    """Every update's metrics, in order."""

    def __init__(self) -> None:
        self.updates: list[dict[str, float]] = []

    def on_update(self, step: int, metrics) -> None:
        self.updates.append(dict(metrics))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    # init_std 0.3: a prior over the action names that the calibration states move (as in the calibration tests).
    return make_tiny_model(tmp_path_factory.mktemp("seeds-lm"), layers=2, hidden=32, init_std=0.3)


def _run(root: Path, model: Path, env: str, **settings) -> tuple[Path, Metrics]:
    """A run at learning rate 0 (its checkpoint keeps the starting draws); returns its final checkpoint and its
    update metrics."""
    config = tiny_config(model, learning_rate=0.0, lora_rank=4, update_epochs=1, **settings)
    name = "-".join(f"{k}{v}" for k, v in sorted(settings.items()) if "seed" in k)
    run = Run.create(env, "ppo_lora", to_dict(config), path=root / f"{env}-{name}")
    metrics = Metrics()
    try:
        summary = PPOLoRAAgent(config).train(EnvConfig(env), run, [metrics])
    finally:
        run.close()
    return Path(summary["checkpoint"]), metrics


def _starting_draws(checkpoint: Path) -> dict[str, torch.Tensor]:
    weights = load_file(checkpoint / ADAPTER_DIR / "adapter_model.safetensors")
    value_head = torch.load(checkpoint / VALUE_HEAD_FILE, map_location="cpu", weights_only=True)
    return weights | {f"value_head.{k}": v for k, v in value_head.items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_init_seed_sets_the_starting_weights_and_offsets_and_defaults_to_seed(tmp_path: Path, model_dir: Path) -> None:
    breakout = dict(total_steps=8, num_envs=2, num_steps=4, minibatch_size=8, action_prior="calibrated",
                    calibration_states=8)  # fmt: skip
    plain, _ = _run(tmp_path, model_dir, BREAKOUT, seed=1, **breakout)
    same_start, _ = _run(tmp_path, model_dir, BREAKOUT, seed=2, init_seed=1, **breakout)
    other_start, _ = _run(tmp_path, model_dir, BREAKOUT, seed=1, init_seed=2, **breakout)

    draws = {run: _starting_draws(run) for run in (plain, same_start, other_start)}
    lora_a = [k for k in draws[plain] if "lora_A" in k]
    assert lora_a and any(draws[plain][k].abs().sum() > 0 for k in lora_a)
    assert _same(draws[plain], draws[same_start]), "init_seed unset is the run's seed"
    assert not any(torch.equal(draws[plain][k], draws[other_start][k]) for k in [*lora_a, "value_head.weight"])

    offsets = {run: json.loads((run / ACTION_BIAS_FILE).read_text()) for run in (plain, same_start, other_start)}
    assert offsets[plain] == offsets[same_start]
    assert offsets[plain] != offsets[other_start], "the calibration states follow init_seed"


def test_seed_alone_sets_the_experience(tmp_path: Path, model_dir: Path) -> None:
    # A fresh LoRA starts as the base model (its B matrices are zero), so without offsets every init_seed starts
    # from the same policy: what the two runs see and do may then depend on seed alone.
    kuhn = dict(total_steps=64, num_envs=8, num_steps=4, minibatch_size=16)
    _, first = _run(tmp_path, model_dir, KUHN, seed=3, **kuhn)
    _, second = _run(tmp_path, model_dir, KUHN, seed=3, init_seed=9, **kuhn)
    assert len(first.updates) == len(second.updates) == 2
    for a, b in zip(first.updates, second.updates, strict=True):
        experience = sorted(k for k in a if k.startswith(("policy/", "charts/episodic_return")))
        assert "charts/episodic_return" in experience and any(k.startswith("policy/mean_prob/") for k in experience)
        assert {k: a[k] for k in experience} == {k: b[k] for k in experience}
    # The value head is part of the start: its estimates differ, and with them the value loss.
    assert first.updates[0]["losses/value_loss"] != second.updates[0]["losses/value_loss"]


def test_a_negative_init_seed_is_one_line() -> None:
    with pytest.raises(ValueError, match="init_seed must be >= 0"):
        tiny_config(init_seed=-1)
