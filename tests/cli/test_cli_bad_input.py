"""Wrong input a new user types, through the real CLI (typer's runner): one line on stderr naming the fix, exit code
2, no traceback, and nothing left on disk; options that would do nothing in the given combination are refused
rather than ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.testing import error_line, invoke

PONG = ("--agent", "random", "--env", "LLMPong-v0")
TTT = ("--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0")
PPO_PONG = ("--agent", "ppo_lora", "--env", "LLMPong-v0")
NANO = ("--agent", "nanogpt_ppo", "--env", "LLMBreakout-ascii-v0")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["play", *PONG, "--set", "seed=-4"], ["seed must be >= 0, got -4"]),
        (["play", *PONG, "--set", "bogus=1"], ["unknown key 'bogus' for AgentConfig. Valid keys: total_steps, seed"]),
        (["play", *PONG, "--env-arg", "frame_skip=2"], ["takes no argument 'frame_skip'; did you mean 'frameskip'?"]),
        (["play", *PONG, "--env-arg", "bogus=1"], ["LLMPong-v0 takes no argument 'bogus' (it takes: cols,"]),
        (["play", *TTT, "--opponent", "mcst"], ["unknown opponent 'mcst'; did you mean 'mcts'?"]),
        (["play", *PONG, "--opponent", "mcts"], ["--opponent is for OpenSpiel envs", "drop --opponent"]),
        (["train", *PONG, "--run-dir", "r", "--runs-root", "rr"], ["give --run-dir", "or --runs-root", "not both"]),
        (["train", "--resume", "r", "--run-dir", "r"], ["--resume continues the run where it is", "--run-dir"]),
        (["sweep", *PONG, "--seeds", "-1", "--dry-run"], ["--seeds takes seeds >= 0"]),
        (["sweep", *PONG, "--parallel", "2", "--ray"], ["--parallel is for local runs"]),
        (["sweep", *PONG, "--cpus-per-run", "2"], ["--cpus-per-run is what a Ray task reserves; add --ray"]),
        (["demos", *TTT, "--out", "d.jsonl", "--all-replies", "--episodes", "3"], ["--episodes does not apply"]),
        (
            ["demos", *TTT, "--out", "d.jsonl", "--all-replies", "--max-steps", "3", "--num-envs", "2"],
            ["--max-steps, --num-envs do not apply: drop them"],
        ),
        (["play", *PONG, "--config", "."], ["config file '.' is a folder; pass a .toml (or .json) file"]),
        (
            ["train", *PPO_PONG, "--set", "entropy_target=0.5", "--set", "entropy_coef=0"],
            ["entropy_target needs 0 < entropy_coef <= entropy_coef_max", "--set entropy_coef=0.001"],
        ),
        (
            ["demos", "--env", "Trace-v0", "--out", "t.jsonl", "--set", "level=one"],
            ["level='one' is not a Trace level"],
        ),
        (
            ["play", "--agent", "lm", "--env", "LLMPong-v0", "--backend", "bogus"],
            ["unknown backend 'bogus'; known: hf,"],
        ),
        (["bench", "--suite", "smoke", "--entry", "bogus"], ["unknown entry 'bogus'; known: lm-smollm2-135m,"]),
        (["play", "--agent", "zzzz", "--env", "LLMPong-v0"], ["unknown agent 'zzzz'", ". Run `llm-gym agents`"]),
        (["bench", "--suite", "smoke", "--merge", "none.sqlite", "--db", "m.sqlite"], ["no such results file"]),
        (["bench", "--suite", "smoke", "--render-only", "--db", "m.sqlite"], ["there is no store at m.sqlite"]),
        (["bench", "--suite", "smoke", "--workers", "2"], ["--workers sets the Ray workers; add --ray"]),
        (["bench", "--suite", "smoke", "--render-only", "--ray"], ["--render-only plays no episode", "--ray"]),
        (["train", *PONG, "--run-dir", ""], ["--run-dir needs a directory name; it got an empty one"]),
        (["train", *PONG, "--runs-root", " "], ["--runs-root needs a directory name"]),
        # numbers: finite and in range, checked where the config is built, before any run directory (#83 item 4)
        (["train", *NANO, "--set", "learning_rate=inf"], ["learning_rate=inf is not a finite number"]),
        (["train", *NANO, "--set", "gamma=1e999"], ["gamma=inf is not a finite number"]),
        (["train", *NANO, "--set", "learning_rate=nan"], ["learning_rate=nan is not a finite number"]),
        (["train", *NANO, "--set", "learning_rate=-1"], ["learning_rate=-1 must be > 0"]),
        (["train", *NANO, "--set", "gamma=1.5"], ["gamma=1.5 must be <= 1 and >= 0"]),
        (["train", *NANO, "--set", "total_steps=1e999"], ["total_steps='1e999' is not a valid int"]),
        (["train", *PPO_PONG, "--set", "learning_rate=-1"], ["learning_rate=-1 must be > 0"]),
        (["sweep", *NANO, "--grid", "learning_rate=1e-3,inf"], ["--grid cell learning_rate=inf", "not a finite"]),
        (["sweep", *NANO, "--set", "gamma=1e999"], ["gamma=inf is not a finite number"]),
        (["sweep", *NANO, "--name", "../../x", "--dry-run"], ["--name '../../x' must be one folder name"]),
        (["sweep", *NANO, "--seeds", "0-100000000", "--dry-run"], ["names more than 10,000 seeds"]),
        (
            [
                "sweep",
                *NANO,
                "--seeds",
                "0-99",
                "--grid",
                "gamma=0.9,0.99",
                "--grid",
                "update_epochs=" + ",".join(map(str, range(1, 52))),
            ],
            ["make 10,200 runs"],
        ),
    ],
)
def test_wrong_input_is_one_line_exit_2_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needles: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    line = error_line(invoke(*args))
    for needle in needles:
        assert needle in line, (needle, line)
    assert not any(tmp_path.iterdir()), "a refused command leaves nothing behind"


def test_the_default_runs_root_is_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("train", *PONG, "--seed", "0", "--set", "total_steps=5")
    assert result.exit_code == 0, result.output
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("LLMPong-v0__random__0__")


def test_a_folder_that_is_not_a_run_is_not_trained_into(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    for where in (".", str(tmp_path)):
        line = error_line(invoke("train", *PONG, "--run-dir", where, "--set", "total_steps=5"))
        assert "is not empty and holds no run; pass a new or empty directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"], "nothing was written beside it"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke("train", *PONG, "--run-dir", str(empty), "--set", "total_steps=5").exit_code == 0
