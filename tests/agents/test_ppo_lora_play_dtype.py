"""A ppo_lora checkpoint played in bfloat16 keeps its adapter beside the weights (merged, a bfloat16 mantissa would
round away much of the LoRA delta) and plays what training's own bfloat16 forward plays; in float32 it is merged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, ActorCritic
from llm_gym.agents.ppo_lora.policy import checkpoint_policy
from llm_gym.agents.ppo_lora.testing import tiny_config, train

ENV = "OpenSpiel-tic_tac_toe-v0"


def _lora_modules(policy) -> int:  # noqa: ANN001
    return sum("lora_A" in name for name, _ in policy.backend.model.named_modules())


def test_bfloat16_play_keeps_the_adapter_and_plays_as_training(tmp_path: Path) -> None:
    import gymnasium as gym

    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(model, total_steps=32, num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1,
                         lora_rank=4)  # fmt: skip
    summary, _ = train(tmp_path / "run", ENV, config)
    checkpoint = Path(summary["checkpoint"])
    observations, infos = [], []
    for seed in range(4):
        env = gym.make(ENV, opponent="random")
        observation, info = env.reset(seed=seed)
        observations.append(observation)
        infos.append(info)
        env.close()

    merged = checkpoint_policy(config, EnvConfig(ENV), checkpoint)
    assert _lora_modules(merged) == 0  # float32: merged, plays at the base model's cost

    bf16 = replace(config, dtype="bfloat16")
    policy = checkpoint_policy(bf16, EnvConfig(ENV), checkpoint)
    assert _lora_modules(policy) > 0
    assert next(policy.backend.model.parameters()).dtype == torch.bfloat16
    _, details = policy.act_with_details(observations, infos)
    ac = ActorCritic(bf16, merged.traits.instructions, adapter=checkpoint / ADAPTER_DIR)
    with torch.no_grad():
        decisions = act(ac, strategy_for(bf16), observations, infos, ENV, generator=torch.Generator(), greedy=True,
                        keep_hidden=False)  # fmt: skip
    for played, trained in zip(details, decisions.probs, strict=True):
        assert played["probs"] == pytest.approx(trained.tolist(), abs=2e-2)
