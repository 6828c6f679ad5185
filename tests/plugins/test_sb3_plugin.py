"""The SB3 plugin under plugins/ is a separate distribution; make install installs it and llm-gym discovers it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from llm_gym.cli import build_app
from llm_gym.plugins import agent_owner, plugins


def test_sb3_plugin_is_discovered_from_its_own_distribution() -> None:
    found = {p.name: p for p in plugins()}
    assert "sb3" in found, "plugins/llm-gym-sb3 is not installed: run `make install`"
    assert found["sb3"].distribution == "llm-gym-sb3" and found["sb3"].loaded
    assert agent_owner("sb3_ppo") == "sb3"


def test_sb3_plugin_trains_resumes_and_plays(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [
        "train",
        "--agent",
        "sb3_ppo",
        "--env",
        "LLMBreakout-text-v0",
        "--run-dir",
        str(run_dir),
        "--set",
        "total_steps=128",
        "--set",
        "num_envs=2",
        "--set",
        "num_steps=32",
        "--set",
        "minibatch_size=32",
        "--set",
        "update_epochs=1",
    ]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert (run_dir / "checkpoints" / "step_128" / "model.zip").is_file()
    resumed = CliRunner().invoke(build_app(), ["train", "--resume", str(run_dir), "--set", "total_steps=192"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 192
    played = CliRunner().invoke(
        build_app(), ["play", "--checkpoint", str(run_dir), "--episodes", "1", "--max-steps", "50", "--json"]
    )
    assert played.exit_code == 0, played.output
    assert json.loads(played.output)["agent"] == "sb3_ppo"


def test_sb3_trains_exactly_total_steps(tmp_path: Path) -> None:
    """SB3 learns in whole rollouts: total_steps=512 with 8 envs x 128 steps used to take 1,024 env steps."""
    run_dir = tmp_path / "run"
    sets = {"total_steps": 48, "num_envs": 2, "num_steps": 16, "minibatch_size": 16, "update_epochs": 1}
    args = ["train", "--agent", "sb3_ppo", "--env", "LLMBreakout-text-v0", "--run-dir", str(run_dir)]
    result = CliRunner().invoke(build_app(), args + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 48  # one rollout of 32, one of 16
    resumed = CliRunner().invoke(build_app(), ["train", "--resume", str(run_dir), "--set", "total_steps=100"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 100
    refused = CliRunner().invoke(build_app(), [*args[:-1], str(tmp_path / "other"), "--set", "total_steps=101"])
    assert refused.exit_code == 2 and "total_steps=101 cannot be exact; use 96 or 104" in refused.stderr
    assert not (tmp_path / "other").exists()
