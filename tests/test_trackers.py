"""``--set tracker=wandb``: a real training run logs the same scalars to Weights & Biases (offline mode, read back
from W&B's own run file) as to TensorBoard, and a resumed run continues the same W&B run."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("wandb", reason="wandb is not installed (make install-trainers)")

pytestmark = pytest.mark.wandb

LLM_GYM = str(Path(sys.executable).parent / "llm-gym")
BLOCK, HEADER = 32768, 7


def wandb_history(run_file: Path) -> dict[int, dict[str, float]]:
    """Each logged step's scalars, read from a ``.wandb`` file (W&B's record log: LevelDB-style blocks of
    checksum, length, fragment type and a protobuf ``Record``)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, position, pending, history = run_file.read_bytes(), HEADER, b"", {}
    while position + 7 <= len(data):
        left = BLOCK - position % BLOCK
        if left < 7:
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4) and pending:
            record = pb.Record()
            record.ParseFromString(pending)
            if record.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                history[int(items.pop("_step"))] = {k: v for k, v in items.items() if not k.startswith("_")}
    return history


def tensorboard_scalars(tb_dir: Path) -> dict[int, dict[str, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tb_dir))
    events.Reload()
    out: dict[int, dict[str, float]] = {}
    for tag in events.Tags()["scalars"]:
        for event in events.Scalars(tag):
            out.setdefault(event.step, {})[tag] = event.value
    return out


def train(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    args = ["train", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--set", "tracker=wandb", *extra]
    return subprocess.run([LLM_GYM, *args], capture_output=True, text=True, env=env, timeout=600, cwd=run_dir.parent)


def test_wandb_gets_the_scalars_tensorboard_gets(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = train(run_dir, "--set", "total_steps=300", "--run-dir", str(run_dir))
    assert done.returncode == 0, done.stderr
    (run_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    logged = wandb_history(run_file)
    board = tensorboard_scalars(run_dir / "tb")
    assert logged and set(logged) == set(board)
    for step, scalars in board.items():
        assert logged[step] == pytest.approx(scalars, rel=1e-6)
    assert (run_dir / "wandb_id").read_text().strip() in run_file.name


def test_an_unknown_tracker_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [LLM_GYM, "train", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--set", "tracker=wandbb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2
    assert "wandb" in done.stderr and len(done.stderr.strip().splitlines()) == 1
