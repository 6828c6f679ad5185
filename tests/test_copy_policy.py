"""``llm-gym copy-policy``: a play-only copy of a tiny real ``nanogpt_ppo`` run, through the real ``llm-gym`` script. The
copy verifies, plays the same greedy episodes as the original, refuses a resume in one line, and a checkpoint that
already lost its training state (copied off another machine without it) still copies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from llm_gym_script import error_line, llm_gym  # tests/llm_gym_script.py

from llm_gym.runs import Run, verify_checkpoint

TINY = {
    "n_layer": 1, "n_head": 2, "n_embd": 16, "mlp_ratio": 2, "num_envs": 2, "num_steps": 32, "minibatch_size": 32,
    "update_epochs": 1, "eval_every": 64, "eval_episodes": 1, "eval_max_steps": 20, "threads": 1,
    "progress": False, "total_steps": 128, "checkpoint_every": 64,
}  # fmt: skip
PLAY = ("--env", "LLMBreakout-ascii-v0", "-n", "2", "--max-steps", "30", "--seed", "5", "--json")


def returns(done: subprocess.CompletedProcess) -> list[tuple[float, int]]:
    assert done.returncode == 0, done.stderr
    return [(e["return"], e["length"]) for e in json.loads(done.stdout)["episodes"]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("copy_policy") / "run"
    sets = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={json.dumps(value)}")]
    done = llm_gym("train", "--agent", "nanogpt_ppo", "--env", "LLMBreakout-ascii-v0", "--run-dir", str(run_dir), *sets)
    assert done.returncode == 0, done.stderr
    return run_dir


def test_the_copy_drops_the_training_state_verifies_and_plays_the_same(trained: Path, tmp_path: Path) -> None:
    done = llm_gym("copy-policy", str(trained), str(tmp_path / "play"))
    assert done.returncode == 0, done.stderr
    copied = Run.open(tmp_path / "play").latest_checkpoint()
    assert copied is not None and copied.name == "step_128"
    kept = set(json.loads((copied / "checkpoint.json").read_text())["files"])
    assert "model.pt" in kept and not kept & {"training.pt", "envs.json"}
    assert not (copied / "training.pt").exists() and verify_checkpoint(copied) is None
    assert json.loads((copied / "policy_copy.json").read_text())["without"] == ["envs.json", "training.pt"]
    assert (tmp_path / "play" / "config.json").read_bytes() == (trained / "config.json").read_bytes()
    assert (tmp_path / "play" / "tb").is_dir()  # the bench's learning curve reads the run's scalars
    original = returns(llm_gym("play", "--checkpoint", str(trained), *PLAY))
    assert returns(llm_gym("play", "--checkpoint", str(tmp_path / "play"), *PLAY)) == original


def test_a_copy_refuses_a_resume_and_an_existing_destination(trained: Path, tmp_path: Path) -> None:
    dest = tmp_path / "play"
    assert llm_gym("copy-policy", str(trained / "checkpoints" / "step_64"), str(dest)).returncode == 0
    before = (dest / "config.json").read_bytes()
    line = error_line(llm_gym("train", "--resume", str(dest)))
    assert "is a play-only copy (llm-gym copy-policy) without its training state (envs.json, training.pt)" in line
    assert (dest / "config.json").read_bytes() == before
    line = error_line(llm_gym("copy-policy", str(trained), str(dest)))
    assert "already exists and is not empty" in line
    assert llm_gym("copy-policy", str(dest), str(tmp_path / "again")).returncode == 0  # a copy of a copy
    assert "(envs.json, training.pt)" in error_line(llm_gym("train", "--resume", str(tmp_path / "again")))
    assert Run.open(dest).latest_checkpoint().name == "step_64"  # nothing was overwritten


def test_a_checkpoint_copied_without_its_training_state_still_copies(trained: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copied"
    shutil.copytree(trained, copy)
    newest = copy / "checkpoints" / "step_128"
    (newest / "training.pt").unlink()  # as when only the policy was copied off a GPU machine
    assert "training.pt is missing" in error_line(llm_gym("play", "--checkpoint", str(newest), *PLAY))
    assert llm_gym("copy-policy", str(copy), str(tmp_path / "play")).returncode == 0
    assert returns(llm_gym("play", "--checkpoint", str(tmp_path / "play"), *PLAY)) == returns(
        llm_gym("play", "--checkpoint", str(trained), *PLAY)
    )
    os.truncate(newest / "model.pt", 10)  # a damaged policy is never copied
    line = error_line(llm_gym("copy-policy", str(newest), str(tmp_path / "again")))
    assert "model.pt has 10 bytes" in line and not (tmp_path / "again").exists()


@pytest.mark.parametrize(
    ("agent", "settings", "files"),
    [
        ("ppo_lora", {}, ("training.pt",)),
        ("nanogpt_ppo", {}, ("training.pt",)),
        ("sft", {}, ("sft_training.pt",)),
        ("curriculum", {"base": "nanogpt_ppo"}, ("training.pt",)),  # the base learner's checkpoints, its files
        ("reflection", {}, ()),
        ("random", {}, ()),
    ],
)
def test_each_agent_names_the_files_only_its_resume_reads(agent: str, settings: dict, files: tuple) -> None:
    # copy-policy leaves out what the run's agent names here (plus the shared envs.pkl / tasks.json); a plugin
    # agent names its own by overriding Agent.resume_only_files.
    from llm_gym.plugins import get_agent

    agent_cls = get_agent(agent)
    assert agent_cls(agent_cls.Config(**settings)).resume_only_files() == files


def test_a_copy_that_cannot_be_written_leaves_nothing_and_is_one_line(trained: Path, tmp_path: Path) -> None:
    """Disk full: copy-policy left a partial folder behind; an unwritable place ended in a traceback."""
    from small_disk import error_lines, on_small_disk

    line = error_line(llm_gym("copy-policy", str(trained), "/proc/x"))
    assert line == "error: cannot write /proc/x: No such file or directory; nothing was copied"
    done = on_small_disk(tmp_path / "disk", "1m", f"""
        fill 8192
        "$LLM_GYM" copy-policy {trained} "$DISK/copy"; echo "copy=$?"
        ls -a "$DISK"
    """)  # fmt: skip
    (line,) = error_lines(done.stderr)
    assert f"cannot write {tmp_path / 'disk'}/copy: No space left on device" in line and "nothing was copied" in line
    assert "copy=2" in done.stdout and "\ncopy\n" not in done.stdout, done.stdout
