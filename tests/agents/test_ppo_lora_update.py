"""The batch-size-robust PPO update of ppo_lora: advantages normalised over the whole rollout (a minibatch without
reward events stays small), and at most ``max_minibatches`` optimizer steps per epoch whatever the rollout size (a
capped step accumulated over passes gives the same step as one pass)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.agents.ppo_lora.update import minibatches, normalize_advantages


def test_rollout_normalisation_keeps_a_quiet_minibatch_quiet() -> None:
    # A sparse-reward rollout: one decision near a point (advantage 5), the rest value-error noise of 0.01.
    generator = torch.Generator().manual_seed(0)
    noise = 0.01 * torch.randn(64, generator=generator)
    rollout = torch.cat([torch.tensor([5.0]), noise[1:]])
    whole = normalize_advantages(rollout)
    assert whole.mean().abs() < 1e-6 and whole.std() == pytest.approx(1.0, abs=1e-5)
    quiet = slice(32, 64)  # a minibatch that holds only noise
    # Per-minibatch normalisation blows the noise up to the scale of the real signal; per rollout it stays ~0.
    assert normalize_advantages(rollout[quiet]).std() == pytest.approx(1.0, abs=1e-5)
    assert (whole[quiet] - whole[quiet].mean()).std() < 0.02
    assert whole[0] > 7.0  # the one informative decision dominates the update
    assert torch.equal(normalize_advantages(torch.tensor([3.0])), torch.tensor([3.0]))


@pytest.mark.parametrize(
    ("samples", "minibatch_size", "steps"),
    [(256, 64, 4), (1024, 64, 4), (2048, 64, 4), (64, 64, 1), (96, 64, 2), (3, 64, 1)],
)
def test_an_epoch_takes_at_most_max_minibatches_steps(samples: int, minibatch_size: int, steps: int) -> None:
    # Steps of minibatch_size decisions, at most max_minibatches of them: more envs, larger steps, not more steps.
    config = tiny_config(None, max_minibatches=4, minibatch_size=minibatch_size)
    epoch = minibatches(samples, config, torch.Generator().manual_seed(1))
    assert len(epoch) == steps
    every = sorted(i for step in epoch for chunk in step for i in chunk)
    assert every == list(range(samples))  # each decision once per epoch
    assert all(len(chunk) <= minibatch_size for step in epoch for chunk in step)
    sizes = [sum(len(c) for c in step) for step in epoch]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.timeout(300)
@pytest.mark.parametrize("advantage_norm", ["rollout", "minibatch"])
def test_a_capped_step_is_the_same_in_any_number_of_passes(tmp_path: Path, advantage_norm: str) -> None:
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    # One update of 32 decisions in 2 optimizer steps (max_minibatches) of 16: one pass each (minibatch_size 16) or
    # passes of 8 accumulated (minibatch_size 8, which alone would be 4 steps).
    settings = dict(
        num_envs=4, num_steps=8, total_steps=32, update_epochs=1, max_minibatches=2, lora_rank=4, kl_coef=0.05,
        learning_rate=1e-2, checkpoint_every=32, advantage_norm=advantage_norm,
    )  # fmt: skip
    adapters = []
    for size in (16, 8):
        summary, run = train(
            tmp_path / f"mb{size}", "LLMBreakout-text-v0", tiny_config(model, minibatch_size=size, **settings)
        )
        assert summary["updates"] == 1
        adapters.append(load_file(run.path / "checkpoints" / "step_32" / "adapter" / "adapter_model.safetensors"))
    assert adapters[0].keys() == adapters[1].keys()
    moved = 0.0
    for key, value in adapters[0].items():
        torch.testing.assert_close(adapters[1][key], value, rtol=1e-4, atol=1e-6)
        if "lora_B" in key:  # B starts at zero: it holds what the update did
            moved += float(value.abs().sum())
    assert moved > 0


@pytest.mark.timeout(300)
def test_the_value_warmup_moves_the_value_head_alone_then_ppo_takes_over(tmp_path: Path) -> None:
    from llm_gym.lm.testing import make_tiny_model
    from llm_gym.training.curves import read_scalars

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    # Three updates of 32 decisions: two that fit the value head only, then one PPO update.
    config = tiny_config(
        model, num_envs=4, num_steps=8, total_steps=96, update_epochs=2, minibatch_size=8, lora_rank=4,
        learning_rate=1e-2, kl_coef=0.05, kl_target=0.01, checkpoint_every=32, keep_checkpoints=3,
        value_warmup_updates=2,
    )  # fmt: skip
    summary, run = train(tmp_path / "run", "LLMBreakout-text-v0", config)
    assert summary["updates"] == 3
    checkpoints = run.path / "checkpoints"

    def lora_b(step: int) -> dict[str, torch.Tensor]:
        weights = load_file(checkpoints / f"step_{step}" / "adapter" / "adapter_model.safetensors")
        return {key: value for key, value in weights.items() if "lora_B" in key}

    def head(step: int) -> torch.Tensor:
        return torch.load(checkpoints / f"step_{step}" / "value_head.pt", weights_only=True)["weight"]

    # During the warm-up the adapter stays at its start (LoRA B is zero) while the value head moves every update.
    assert all(float(value.abs().sum()) == 0.0 for value in lora_b(64).values())
    assert all(float(value.abs().sum()) == 0.0 for value in lora_b(32).values())
    assert not torch.equal(head(32), head(64))
    # The first PPO update moves the adapter.
    assert sum(float(value.abs().sum()) for value in lora_b(96).values()) > 0
    scalars = read_scalars(run.path)
    steps, flags = scalars["losses/value_warmup"]
    assert steps.tolist() == [32, 64] and flags.tolist() == [1.0, 1.0]
    assert "losses/policy_loss" in scalars and scalars["losses/policy_loss"][0].tolist() == [96]
    # The KL controller holds its coefficient during the warm-up (it has no KL to react to there).
    kl_steps, kl_coefs = scalars["charts/kl_coef"]
    assert kl_coefs[:2].tolist() == pytest.approx([0.05, 0.05])
    assert kl_coefs[2] != pytest.approx(0.05)
    # The logged learning rate is the warm-up's own while it lasts.
    assert scalars["charts/learning_rate"][1][:2].tolist() == pytest.approx([config.value_warmup_learning_rate] * 2)
