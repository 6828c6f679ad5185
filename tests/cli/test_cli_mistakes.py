"""Mistakes on the command line, through the real ``llm-gym`` script: exit code 2, one line on stderr, no traceback,
and nothing left on disk by a command that could not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LLM_GYM = str(Path(sys.executable).parent / "llm-gym")
PONG = ["--agent", "random", "--env", "LLMPong-v0"]


def llm_gym(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LLM_GYM_DEBUG"}
    return subprocess.run([LLM_GYM, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def assert_one_line_error(done: subprocess.CompletedProcess, *needles: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["trian"], ["unknown command 'trian'", "did you mean 'train'"]),
        (["demoz"], ["unknown command 'demoz'"]),
        (["play", "--bogus"], ["No such option: --bogus"]),
        (["envs", "--family", "bogus"], ["unknown env family 'bogus'"]),
        (["envs", "--family", "atary"], ["did you mean 'atari'"]),
        (["play", *PONG, "--max-steps", "-1"], ["--max-steps"]),
        (["play", *PONG, "--max-steps", "0"], ["--max-steps"]),
        (["play", *PONG, "--episodes", "many"], ["--episodes"]),
        (["play", *PONG, "--seed", "-3"], ["--seed", "greater than or equal to 0"]),
        (["train", *PONG, "--seed", "-1"], ["--seed", "greater than or equal to 0"]),
        (["sweep", *PONG, "--parallel", "0"], ["--parallel", "greater than or equal to 1"]),
        (["train", *PONG, "--env-arg", "frameskip=abc"], ["frameskip must be an int"]),
        (["train", *PONG, "--env-arg", "repeat_action_probability=2"], ["repeat_action_probability must be in 0..1"]),
        (["train", *PONG, "--run-dir", "/proc/llm-gym-no/run"], ["cannot create the run directory"]),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    assert_one_line_error(llm_gym(*args, cwd=tmp_path), *needles)
    assert not any(tmp_path.iterdir()), "a refused command leaves nothing behind (no runs/ folder)"


@pytest.mark.parametrize("content", ["[1, 2]", '"abc"', "{not json"])
def test_a_config_file_that_is_not_a_table(tmp_path: Path, content: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    assert_one_line_error(llm_gym("train", *PONG, "--config", str(path), cwd=tmp_path), "config file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_runs_root_that_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    assert_one_line_error(llm_gym("train", *PONG, "--runs-root", str(blocker)), "cannot create the run directory")


def test_video_needs_an_existing_writable_folder_and_creates_none(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "deeper" / "episode.mp4"
    assert_one_line_error(llm_gym("play", *PONG, "--video", str(missing)), "does not exist")
    assert not (tmp_path / "missing").exists()
    top = Path(f"/llm-gym-test-{os.getpid()}")
    assert_one_line_error(llm_gym("play", *PONG, "--video", str(top / "x.mp4")), "does not exist")
    assert not top.exists(), "nothing is created at the filesystem root"
    assert_one_line_error(llm_gym("play", *PONG, "--video", str(tmp_path)), "is a folder")
    assert_one_line_error(llm_gym("play", *PONG, "--video", os.devnull), "is not a regular file")


def test_a_video_that_could_not_be_written_is_not_reported_as_written(tmp_path: Path) -> None:
    done = llm_gym("play", *PONG, "--episodes", "1", "--max-steps", "3", "--video", str(tmp_path / "v.unknown"),
                   "--json")  # fmt: skip
    assert done.returncode == 0 and "not written" in done.stderr, done.stderr
    assert json.loads(done.stdout)["video"] is None


def test_an_agent_refusing_the_env_leaves_no_run_dir_and_the_rerun_says_the_same(tmp_path: Path) -> None:
    args = ("train", "--agent", "nanogpt_ppo", "--env", "LLMPong-vision-v0", "--run-dir", str(tmp_path / "run"))
    first = assert_one_line_error(llm_gym(*args), "nanogpt_ppo reads text observations")
    assert not (tmp_path / "run").exists()
    assert assert_one_line_error(llm_gym(*args)) == first  # not "already holds a run"
