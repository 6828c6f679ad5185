"""ppo_lora's defaults are the measured recipe (issue 87: group advantages, the target loss in score mode, the loss's
own learning rate), and a run saved before those defaults existed still loads and resumes as it trained (the
critic, the clipped ratio)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.cli import build_app
from llm_gym.config import from_dict, to_dict

KUHN = "OpenSpiel-kuhn_poker-v0"


def test_the_defaults_are_the_group_recipe_and_the_loss_follows_the_action_mode() -> None:
    score = PPOLoRAConfig()
    assert score.advantage == "group" and score.uses_groups
    assert (score.policy_loss, score.loss, score.peak_learning_rate) == ("auto", "target", 1e-3)
    # Generate mode samples tokens: no distribution over actions to reweight, so auto is PPO's clipped ratio.
    generate = PPOLoRAConfig(action_mode="generate")
    assert (generate.loss, generate.peak_learning_rate) == ("clip", 2e-4)
    assert PPOLoRAConfig(policy_loss="clip").peak_learning_rate == 2e-4
    assert PPOLoRAConfig(learning_rate=5e-4).peak_learning_rate == 5e-4
    with pytest.raises(ValueError, match="policy_loss=target .* needs action_mode=score"):
        PPOLoRAConfig(action_mode="generate", policy_loss="target")


def test_a_config_saved_before_the_new_defaults_loads_as_it_trained() -> None:
    saved = to_dict(PPOLoRAConfig(advantage="gae", policy_loss="clip", learning_rate=2e-4))
    older = {k: v for k, v in saved.items() if k not in ("advantage", "policy_loss")}
    loaded = from_dict(PPOLoRAConfig, older)
    assert (loaded.advantage, loaded.loss, loaded.peak_learning_rate) == ("gae", "clip", 2e-4)
    # A config saved now keeps what it says, an unset learning rate included.
    now = from_dict(PPOLoRAConfig, to_dict(PPOLoRAConfig()))
    assert (now.advantage, now.policy_loss, now.learning_rate) == ("group", "auto", None)


def test_a_gae_run_saved_before_the_fields_existed_resumes_with_its_value_head(tmp_path: Path, tiny_model_dir: Path):
    config = tiny_config(tiny_model_dir, total_steps=16, num_envs=2, num_steps=4, minibatch_size=8, lora_rank=4,
                         eval_every=0, checkpoint_every=8)  # fmt: skip
    run_dir = tmp_path / "run"
    summary, _ = train(run_dir, KUHN, config)
    assert summary["advantage"] == "gae" and (Path(summary["checkpoint"]) / "value_head.pt").exists()
    saved = json.loads((run_dir / "config.json").read_text())
    for name in ("advantage", "policy_loss"):  # what a run written before issue 87 lacks
        del saved["config"][name]
    (run_dir / "config.json").write_text(json.dumps(saved))
    result = CliRunner().invoke(build_app(), ["train", "--resume", str(run_dir), "--set", "total_steps=24"])
    assert result.exit_code == 0, result.output
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["advantage"] == "gae" and resumed["env_steps"] >= 24
    assert (Path(resumed["checkpoint"]) / "value_head.pt").exists()
