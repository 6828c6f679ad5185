"""Run directories: checkpoints are complete or absent, whatever moment a run dies at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llm_gym.errors import CheckpointError
from llm_gym.runs import Run, find_run_dir
from llm_gym.runs.provenance import code_version


def test_create_writes_the_resolved_config(tmp_path: Path) -> None:
    run = Run.create("LLMPong-v0", "random", {"seed": 3, "total_steps": 10}, root=tmp_path, env_kwargs={"frameskip": 2})
    assert run.path.parent == tmp_path and run.path.name.startswith("LLMPong-v0__random__3__")
    saved = json.loads((run.path / "config.json").read_text())
    assert saved == {
        "agent": "random",
        "env_id": "LLMPong-v0",
        "env_kwargs": {"frameskip": 2},
        "config": {"seed": 3, "total_steps": 10},
        "code": code_version(),
    }
    with pytest.raises(CheckpointError, match="already holds a run"):
        Run.create("LLMPong-v0", "random", {}, path=run.path)


def test_checkpoints_are_atomic(tmp_path: Path) -> None:
    run = Run.create("LLMPong-v0", "random", {}, path=tmp_path / "run")
    with run.checkpoint(10) as directory:
        (directory / "weights.bin").write_bytes(b"x" * 10)
    with pytest.raises(RuntimeError), run.checkpoint(20) as directory:
        (directory / "weights.bin").write_bytes(b"half")
        raise RuntimeError("killed while writing")
    assert [step for step, _ in run.checkpoints()] == [10]
    assert run.latest_checkpoint() == run.checkpoints_dir / "step_10"
    assert not list(run.checkpoints_dir.glob(".tmp-*"))
    with run.checkpoint(30, name="best") as directory:
        (directory / "weights.bin").write_bytes(b"best")
    with run.checkpoint(40) as directory:
        pass
    run.prune_checkpoints(keep=1)
    assert [step for step, _ in run.checkpoints()] == [40] and (run.checkpoints_dir / "best").is_dir()
    assert find_run_dir(run.checkpoints_dir / "step_40") == run.path


def test_resolve_checkpoint_takes_a_checkpoint_or_a_run_directory(tmp_path: Path) -> None:
    run = Run.create("LLMPong-v0", "random", {}, path=tmp_path / "run")
    assert Run.resolve_checkpoint(run.path, required=False)[1] is None
    with pytest.raises(CheckpointError, match="has no complete checkpoint yet"):
        Run.resolve_checkpoint(run.path)
    for step in (5, 9):
        with run.checkpoint(step):
            pass
    found, checkpoint = Run.resolve_checkpoint(run.path)
    assert found.path == run.path and checkpoint == run.checkpoints_dir / "step_9"
    assert Run.resolve_checkpoint(run.checkpoints_dir / "step_5")[1] == run.checkpoints_dir / "step_5"
    with pytest.raises(CheckpointError, match="is not a checkpoint of an llm-gym run"):
        Run.resolve_checkpoint(tmp_path)


def test_sigkill_mid_checkpoint_leaves_the_previous_one(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import time
        from llm_gym.runs import Run
        run = Run.create("LLMPong-v0", "random", {{}}, path={str(tmp_path / "run")!r})
        with run.checkpoint(1) as d:
            (d / "w").write_text("complete")
        with run.checkpoint(2) as d:
            (d / "w").write_text("partial")
            print("writing", flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = Run.open(tmp_path / "run")
    assert run.latest_checkpoint().name == "step_1"
    assert (run.latest_checkpoint() / "w").read_text() == "complete"
    assert not list(run.checkpoints_dir.glob(".tmp-*")), "open() clears what the killed run left"


def test_open_rejects_non_runs(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a run directory"):
        Run.open(tmp_path)


def test_tensorboard_scalars(tmp_path: Path) -> None:
    run = Run.create("LLMPong-v0", "random", {}, path=tmp_path / "run")
    run.log_scalars(5, {"charts/episodic_return": 1.5})
    run.close()
    assert list((run.path / "tb").glob("events.out.tfevents.*"))


def test_resumed_scalars_keep_the_checkpoint_step_and_replace_what_came_after(tmp_path: Path) -> None:
    """A run stopped after its step-2 checkpoint had logged step 3; resumed from step 2, TensorBoard shows steps 1
    and 2 as first logged and step 3 as the resumed run logged it."""
    from llm_gym.training.curves import read_scalars

    stopped = Run.create("LLMPong-v0", "random", {}, path=tmp_path / "run")
    for step in (1, 2):
        stopped.log_scalars(step, {"eval/mean_return": float(step)})
    with stopped.checkpoint(2) as directory:
        (directory / "state.txt").write_text("2")
    stopped.log_scalars(3, {"eval/mean_return": -1.0})  # after the checkpoint: stale once resumed
    stopped.close()

    resumed = Run.open(tmp_path / "run")
    resumed.resumed_from = resumed.latest_checkpoint()
    resumed.log_scalars(3, {"eval/mean_return": 3.0})
    resumed.close()
    steps, values = read_scalars(tmp_path / "run")["eval/mean_return"]
    assert steps.tolist() == [1, 2, 3] and values.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("text", [None, '{"env_steps": 1', "[1, 2]"], ids=["missing", "truncated", "not-an-object"])
def test_every_reader_of_a_summary_treats_a_broken_one_as_none(tmp_path: Path, text: str | None) -> None:
    from llm_gym.bench.training import training_info
    from llm_gym.sweeps.grid import Cell
    from llm_gym.sweeps.plan import PlannedRun, is_finished
    from llm_gym.sweeps.results import collect

    run = Run.create("LLMPong-v0", "random", {"seed": 0, "total_steps": 8}, path=tmp_path / "run")
    with run.checkpoint(8):
        pass
    if text is not None:
        (run.path / "summary.json").write_text(text)
    assert run.read_summary() == {}
    assert not is_finished(run.path, {"total_steps": 8})  # so a sweep resumes it instead of counting it
    cell = Cell(())
    [row] = collect([PlannedRun(cell, 0, run.path, "resume", {})], [cell])
    assert row["seeds"] == []  # the seed is not counted as finished, and the table has no value for it
    info = training_info(run.checkpoints_dir / "step_8")  # the bench's training row falls back to the checkpoint
    assert info["env_steps"] == 8 and info["agent"] == "random"
    run.write_summary({"env_steps": 8})
    assert is_finished(run.path, {"total_steps": 8}) and run.read_summary()["env_steps"] == 8
