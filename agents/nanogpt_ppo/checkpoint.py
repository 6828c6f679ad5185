"""What a resumable checkpoint holds and how it is read back, so ``--resume`` continues the run exactly.

A checkpoint is taken between updates. Besides the network (``policy.save_network``) it holds the optimizer, the
sampler's RNG, the counters, the loop's own state (lives, the GAE ``next_done`` flags) and, in ``envs.pkl``, the
stepper's state (:meth:`llm_gym.stepping.EnvStepper.state_dict`: env snapshots, observations, episode statistics).
Envs that cannot be snapshot start new episodes on resume instead (the run continues, though not bit for bit).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym.agents.nanogpt_ppo.files import TRAINING_FILE
from llm_gym.errors import CheckpointError
from llm_gym.training.loop import Counters, load_envs, save_envs


@dataclass
class LoopState:
    """What the training loop carries from one step to the next besides the envs."""

    lives: np.ndarray
    """Lives left per env after the latest step (a drop is a life lost)."""
    next_done: torch.Tensor
    """1 where the latest observation starts a new episode (or life), for GAE."""

    @classmethod
    def fresh(cls, lives: np.ndarray) -> LoopState:
        """The state right after the envs were reset."""
        return cls(lives, torch.zeros(len(lives)))


def save_training(
    directory: Path,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    counters: Counters,
    loop: LoopState,
    env_state: dict[str, Any],
) -> None:
    """Write the training state (the network is saved beside it by ``policy.save_network``)."""
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "generator": generator.get_state(),
            "counters": counters.state_dict(),
            "loop": {"lives": torch.from_numpy(loop.lives.copy()), "next_done": loop.next_done.clone()},
        },
        directory / TRAINING_FILE,
    )
    save_envs(directory, env_state)


def load_training(
    directory: Path, optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> tuple[Counters, LoopState, dict[str, Any]]:
    """Restore the optimizer and RNG in place; return the counters, the loop state and the stepper's state."""
    try:  # a file that verifies can still hold the wrong things (rewritten with its manifest): one line
        data = torch.load(directory / TRAINING_FILE, map_location="cpu", weights_only=True)
        env_state = load_envs(directory)
        optimizer.load_state_dict(data["optimizer"])
        generator.set_state(data["generator"])
        loop = LoopState(lives=data["loop"]["lives"].numpy(), next_done=data["loop"]["next_done"])
        return Counters.from_state_dict(data["counters"]), loop, env_state
    except (OSError, RuntimeError, pickle.UnpicklingError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"cannot resume from {directory}: {type(exc).__name__}: {exc}") from exc
