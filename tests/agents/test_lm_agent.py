"""The zero-shot ``lm`` agent through the CLI: plays with --model/--backend, records episodes when trained, and
rejects a backend option for agents without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.cli import build_app

runner = CliRunner()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_play_with_model_and_backend(model_dir: Path, mode: str) -> None:
    result = runner.invoke(build_app(), [
        "play", "--agent", "lm", "--model", str(model_dir), "--backend", "hf", "--env", "LLMPong-text-v0",
        "--episodes", "2", "--num-envs", "2", "--max-steps", "3", "--json",
        "--set", f"action_mode={mode}", "--set", "dtype=float32", "--set", "max_new_tokens=3",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["agent"] == "lm" and [e["length"] for e in report["episodes"]] == [3, 3]


def test_train_records_episodes_and_bad_backend_options(model_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = runner.invoke(build_app(), [
        "train", "--agent", "lm", "--model", str(model_dir), "--env", "LLMBreakout-text-v0", "--run-dir", str(run),
        "--set", "total_steps=6", "--set", "num_envs=2", "--set", "dtype=float32",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 6 and summary["model"] == str(model_dir)
    wrong = runner.invoke(build_app(), ["play", "--agent", "random", "--backend", "hf", "--env", "LLMPong-v0"])
    assert wrong.exit_code == 2 and "no backend to choose" in wrong.output
    unknown = runner.invoke(build_app(), [
        "play", "--agent", "lm", "--backend", "hff", "--model", str(model_dir), "--env", "LLMPong-v0",
    ])  # fmt: skip
    assert unknown.exit_code == 2 and "did you mean 'hf'" in unknown.output
