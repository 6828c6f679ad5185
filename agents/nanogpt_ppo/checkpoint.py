"""What a resumable checkpoint holds and how it is read back, so ``--resume`` continues the run exactly.

A checkpoint is taken between updates. Besides the network it holds the optimizer, the sampler's RNG, the
counters, and the envs where they stand: each env's emulator snapshot (``clone_state``, RNG included), the current
observations, masks and lives, and the running episode returns. Envs that cannot be snapshot are reset with fresh
seeds on resume instead (the run continues, though not bit for bit).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym.errors import CheckpointError

TRAINING_FILE, ENVS_FILE, TASKS_FILE = "training.pt", "envs.pkl", "tasks.json"


@dataclass
class Counters:
    """Progress of a run; saved in every checkpoint and reported in the summary."""

    global_step: int = 0
    """Env steps so far, summed over envs."""
    update: int = 0
    """Updates done."""
    episodes: int = 0
    """Training episodes finished."""
    best_eval_return: float = float("-inf")
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    """(env step, mean evaluation return) of every evaluation."""
    cpu_seconds: float = 0.0
    """CPU time of the training process (all its threads; not the workers of vector_env=async), summed over resumes."""
    wall_seconds: float = 0.0


@dataclass
class EnvLoopState:
    """Where the training envs stand between two updates."""

    observations: list[str]
    masks: np.ndarray
    lives: np.ndarray
    next_done: torch.Tensor
    episode_return: np.ndarray
    episode_length: np.ndarray

    @classmethod
    def fresh(cls, observations: Sequence[str], masks: np.ndarray, lives: np.ndarray) -> EnvLoopState:
        """The state right after the envs were reset."""
        n = len(observations)
        return cls(list(observations), masks, lives, torch.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))


def save_training(
    directory: Path,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    counters: Counters,
    loop: EnvLoopState,
    env_states: list[Any] | None,
    tasks: dict[str, Any] | None = None,
) -> None:
    """Write the training state (the network is saved beside it by ``policy.save_network``); ``tasks`` is the task
    sampler's state (:func:`llm_gym.sampled_tasks.sampler_state`) when one feeds the envs."""
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "generator": generator.get_state(),
            "counters": asdict(counters),
            "loop": {
                "observations": list(loop.observations),
                "masks": torch.from_numpy(loop.masks.copy()),
                "lives": torch.from_numpy(loop.lives.copy()),
                "next_done": loop.next_done.clone(),
                "episode_return": torch.from_numpy(loop.episode_return.copy()),
                "episode_length": torch.from_numpy(loop.episode_length.copy()),
            },
        },
        directory / TRAINING_FILE,
    )
    if env_states is not None:
        with open(directory / ENVS_FILE, "wb") as handle:
            pickle.dump(env_states, handle)
    if tasks is not None:
        (directory / TASKS_FILE).write_text(json.dumps(tasks))


def load_tasks(directory: Path) -> dict[str, Any] | None:
    """The task sampler's state saved with a checkpoint, if any."""
    path = directory / TASKS_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def load_training(
    directory: Path, optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> tuple[Counters, EnvLoopState, list[Any] | None]:
    """Restore the optimizer and RNG in place; return the counters, the env loop state and the env snapshots."""
    try:
        data = torch.load(directory / TRAINING_FILE, weights_only=True)
    except (OSError, RuntimeError) as exc:
        raise CheckpointError(f"cannot resume from {directory}: {exc}") from exc
    optimizer.load_state_dict(data["optimizer"])
    generator.set_state(data["generator"])
    raw = data["counters"]
    counters = Counters(**{**raw, "eval_history": [tuple(pair) for pair in raw["eval_history"]]})
    loop = data["loop"]
    state = EnvLoopState(
        observations=list(loop["observations"]),
        masks=loop["masks"].numpy(),
        lives=loop["lives"].numpy(),
        next_done=loop["next_done"],
        episode_return=loop["episode_return"].numpy(),
        episode_length=loop["episode_length"].numpy(),
    )
    env_states = None
    if (directory / ENVS_FILE).is_file():
        # Our own file, written by save_training into a run directory the user owns.
        with open(directory / ENVS_FILE, "rb") as handle:
            env_states = pickle.load(handle)
    return counters, state, env_states
