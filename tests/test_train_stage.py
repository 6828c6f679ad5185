"""scripts/train_stage.sh, the resumable training stage of the pipeline scripts (breakout_sft_ppo.sh,
trace_sft_ppo.sh), on real tiny sft runs: a run stopped by its time limit before its first
checkpoint starts again from nothing, one killed after a checkpoint resumes from it to the end of the uninterrupted
run, and a finished one is skipped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.demos.tree import record_demo_tree
from llm_gym.plugins import get_agent

STAGE = Path(__file__).resolve().parents[1] / "scripts" / "train_stage.sh"
LLM_GYM = Path(sys.executable).parent / "llm-gym"


@pytest.fixture(scope="module")
def tree_and_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from llm_gym.lm.testing import make_tiny_model

    root = tmp_path_factory.mktemp("stage")
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    tree = root / "tree.jsonl"
    record_demo_tree(get_agent("solver")().policy(env), env, tree, source={"agent": "solver"})
    return tree, make_tiny_model(root / "tiny-lm", layers=2, hidden=64, init_std=0.1)


def start_stage(run_dir: Path, seconds: int, tree: Path, model: Path) -> subprocess.Popen[str]:
    """`train_stage RUN_DIR SECONDS llm-gym train --agent sft ...` in a shell of its own process group."""
    train = [str(LLM_GYM), "train", "--agent", "sft", "--env", "OpenSpiel-tic_tac_toe-v0", "--set", f"demos={tree}"]
    for setting in (f"model={model}", "dtype=float32", "threads=1", "trainable_layers=1", "max_demos=96", "epochs=3",
                    "minibatch_size=8", "checkpoint_every=1", "validation_fraction=0", "eval_episodes=0",
                    "eval_at_start=false", "progress=false"):  # fmt: skip
        train += ["--set", setting]
    script = f'source "{STAGE}"; train_stage "$0" {seconds} "$@"'
    return subprocess.Popen(
        ["bash", "-c", script, str(run_dir), *train],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def run_stage(run_dir: Path, seconds: int, tree: Path, model: Path) -> tuple[int, str]:
    process = start_stage(run_dir, seconds, tree, model)
    out, err = process.communicate(timeout=600)
    return process.returncode, out + err


def test_a_stage_stopped_before_its_first_checkpoint_starts_again(
    tree_and_model: tuple[Path, Path], tmp_path: Path
) -> None:
    tree, model = tree_and_model
    run_dir = tmp_path / "run"
    status, _ = run_stage(run_dir, 1, tree, model)  # one second: stopped while python still loads
    assert status == 124 and not (run_dir / "summary.json").exists()
    assert not list(run_dir.glob("checkpoints/step_*"))
    status, output = run_stage(run_dir, 0, tree, model)
    assert status == 0, output
    assert "resuming" not in output and json.loads((run_dir / "summary.json").read_text())["examples_seen"] == 288


def test_a_killed_stage_resumes_to_the_end_and_a_finished_one_is_skipped(
    tree_and_model: tuple[Path, Path], tmp_path: Path
) -> None:
    tree, model = tree_and_model
    run_dir = tmp_path / "run"
    process = start_stage(run_dir, 0, tree, model)
    deadline = time.monotonic() + 300
    while not list(run_dir.glob("checkpoints/step_*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)  # as a lease's end or a crash would: no chance to clean up
    process.communicate()
    assert not (run_dir / "summary.json").exists(), "the run ended before it could be killed"
    status, output = run_stage(run_dir, 0, tree, model)
    assert status == 0, output
    assert f"resuming {run_dir} from its last checkpoint" in output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["examples_seen"] == 288 and summary["updates"] == 36  # 96 demos x 3 epochs in batches of 8
    finished = (run_dir / "summary.json").stat().st_mtime_ns
    status, output = run_stage(run_dir, 0, tree, model)
    assert status == 0 and output == "" and (run_dir / "summary.json").stat().st_mtime_ns == finished
