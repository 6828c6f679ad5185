"""``llm-gym export``: a ppo_lora checkpoint merged into a model that transformers alone loads (same outputs as base
+ adapter through peft), or copied as a plain adapter; bad input is one line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py
from typer.testing import CliRunner

from llm_gym.cli import build_app
from llm_gym.lm.runtime import quiet_peft

runner = CliRunner()


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_breakout_run(tmp_path_factory.mktemp("export"))


def test_merged_export_loads_with_transformers_alone(trained_run: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = tmp_path / "merged"
    result = runner.invoke(build_app(), ["export", "--checkpoint", str(trained_run), "--merge", "--out", str(out)])
    assert result.exit_code == 0, result.output
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    checkpoint = trained_run / "checkpoints" / "step_8"
    base = AutoModelForCausalLM.from_pretrained(trained_run.parent / "model")
    with quiet_peft():
        reference = PeftModel.from_pretrained(base, str(checkpoint / "adapter")).eval()
    ids = torch.tensor([[5, 17, 40, 41, 60, 2, 9]])
    with torch.no_grad():
        expected, got = reference(ids).logits, merged(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(trained_run.parent / "model")(ids).logits
    assert torch.allclose(expected, got, atol=1e-4)
    assert not torch.allclose(plain, got, atol=1e-4), "the adapter should have changed the model"
    assert (out / "tokenizer_config.json").is_file()


def test_adapter_only_export_and_errors(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "adapter"
    result = runner.invoke(build_app(), ["export", "-c", str(trained_run), "--adapter-only", "-o", str(out)])
    assert result.exit_code == 0 and (out / "adapter_config.json").is_file()
    again = runner.invoke(build_app(), ["export", "-c", str(trained_run), "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output
    baseline = tmp_path / "random-run"
    played = runner.invoke(build_app(), ["train", "--agent", "random", "--env", "LLMBreakout-text-v0",
                                         "--run-dir", str(baseline), "--set", "total_steps=5"])  # fmt: skip
    assert played.exit_code == 0
    nothing = runner.invoke(build_app(), ["export", "-c", str(baseline), "-o", str(tmp_path / "x")])
    assert nothing.exit_code == 2 and "no complete checkpoint" in nothing.output
