"""Where a run's scalars go: TensorBoard always (``<run>/tb``, which ``llm-gym plot`` and the curves read), and Weights
& Biases beside it with ``--set tracker=wandb`` (extra ``wandb``).

A W&B run is named after the run directory, keeps its files in ``<run>/wandb``, carries the resolved config, and is
resumed (same W&B id, kept in ``<run>/wandb_id``) when the llm-gym run is. ``WANDB_MODE=offline`` logs without a
network (``wandb sync`` uploads later); ``WANDB_PROJECT`` picks the project (default ``llm-gym``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from llm_gym.errors import MissingDependencyError

TrackerName = Literal["tensorboard", "wandb"]
TRACKERS: tuple[str, ...] = ("tensorboard", "wandb")


class Tracker(Protocol):
    def log(self, step: int, scalars: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    """Scalars as TensorBoard events in ``directory``; ``purge_step`` hides what a stopped run logged after it."""

    def __init__(self, directory: Path, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter  # heavy; only runs that log pay for it

        self.writer = SummaryWriter(str(directory), purge_step=purge_step)

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, float(value), step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """Scalars in a Weights & Biases run tied to the llm-gym run directory."""

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise MissingDependencyError("tracker=wandb", "wandb") from exc
        id_file = run_dir / "wandb_id"
        resumed = id_file.is_file()
        run_id = id_file.read_text().strip() if resumed else uuid.uuid4().hex[:12]
        id_file.write_text(run_id)
        (run_dir / "wandb").mkdir(exist_ok=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "llm-gym"),
            name=run_dir.name,
            id=run_id,
            resume="allow" if resumed else None,
            dir=str(run_dir),
            config=dict(config),
            settings=wandb.Settings(console="off", silent=True),
        )

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        self.run.log({key: float(value) for key, value in scalars.items()}, step=step)

    def close(self) -> None:
        self.run.finish()


def open_trackers(name: str, run_dir: Path, config: Mapping[str, Any], purge_step: int | None) -> list[Tracker]:
    """The trackers ``name`` asks for: TensorBoard, plus W&B for ``wandb``."""
    trackers: list[Tracker] = [TensorBoardTracker(run_dir / "tb", purge_step)]
    if name == "wandb":
        trackers.append(WandbTracker(run_dir, config))
    return trackers
