"""A ppo_lora run killed with SIGKILL resumes from its newest complete checkpoint and ends exactly where an
uninterrupted run ends (same adapter, value head and optimizer state, bit for bit on one thread)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.testing import tiny_settings
from llm_gym.config import to_dict
from llm_gym.runs import Run
from llm_gym.testing import cli_command, kill_once_written

ENV = "LLMBreakout-text-v0"


def _settings(model: Path) -> dict:
    # Two envs x 16 steps per update and a checkpoint after each: the kill lands between checkpoints. An entropy
    # floor above any four-action entropy raises the bonus at every update, so a resume that lost it would diverge.
    rollout = dict(num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1, lora_rank=4, kl_coef=0.05,
                   entropy_target=2.0)  # fmt: skip
    return tiny_settings(model, total_steps=96, **rollout, eval_every=0, checkpoint_every=32, keep_checkpoints=5)


def _final_state(run_dir: Path) -> dict[str, torch.Tensor]:
    final = run_dir / "checkpoints" / "step_96"
    state = load_file(final / "adapter" / "adapter_model.safetensors")
    state.update({f"value.{k}": v for k, v in torch.load(final / "value_head.pt", weights_only=True).items()})
    optimizer = torch.load(final / "training.pt", weights_only=True)["optimizer"]["state"]
    state.update({f"adam.{k}": v["exp_avg"] for k, v in optimizer.items()})
    return state


@pytest.mark.timeout(300)
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    settings = _settings(model)
    config = PPOLoRAConfig(**settings)

    # The reference: one uninterrupted run in this process.
    straight = Run.create(ENV, "ppo_lora", to_dict(config), path=tmp_path / "straight")
    PPOLoRAAgent(config).train(EnvConfig(ENV), straight)
    straight.close()

    # The same run in a subprocess, killed with SIGKILL as soon as its first checkpoint is complete.
    killed = tmp_path / "killed"
    command = cli_command("train", "--agent", "ppo_lora", "--env", ENV, "--run-dir", str(killed))
    command += [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    first = killed / "checkpoints" / "step_32" / "checkpoint.json"
    stderr = kill_once_written(command, first, timeout=240)
    assert first.exists(), stderr
    assert not (killed / "summary.json").exists(), "the run finished before it could be killed"

    # Resume it the way `llm-gym train --resume` does.
    run = Run.open(killed)
    run.resumed_from = run.latest_checkpoint()
    assert run.resumed_from is not None and run.resumed_from.name in ("step_32", "step_64")
    PPOLoRAAgent(config).train(EnvConfig(ENV), run)
    run.close()

    expected, resumed = _final_state(tmp_path / "straight"), _final_state(killed)
    assert expected.keys() == resumed.keys() and len(expected) > 4
    for key in expected:
        assert torch.equal(expected[key], resumed[key]), key


def test_a_resume_trains_at_the_learning_rate_it_is_given(tmp_path: Path) -> None:
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    settings = {**_settings(model), "total_steps": 32, "lr_schedule": "constant"}
    run = Run.create(ENV, "ppo_lora", to_dict(PPOLoRAConfig(**settings)), path=tmp_path / "run")
    PPOLoRAAgent(PPOLoRAConfig(**settings)).train(EnvConfig(ENV), run)
    run.close()
    faster = PPOLoRAConfig(**{**settings, "total_steps": 64, "learning_rate": settings.get("learning_rate", 1e-3) * 7})
    run = Run.open(tmp_path / "run")
    run.resumed_from = run.latest_checkpoint()
    PPOLoRAAgent(faster).train(EnvConfig(ENV), run)
    run.close()
    state = torch.load(tmp_path / "run" / "checkpoints" / "step_64" / "training.pt", weights_only=True)
    group = state["optimizer"]["param_groups"][0]
    assert group["lr"] == group["initial_lr"] == faster.learning_rate
    assert state["scheduler"]["base_lrs"] == [faster.learning_rate]
