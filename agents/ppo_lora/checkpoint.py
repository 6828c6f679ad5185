"""What a ``ppo_lora`` checkpoint holds, so that ``--resume`` continues exactly where the run stood:

* ``adapter/`` — the LoRA adapter by ``save_pretrained`` (``PeftModel.from_pretrained(base, ckpt/adapter)`` loads
  it; its config names the base model directory);
* ``value_head.pt`` — the value head;
* ``training.pt`` — optimizer, LR scheduler, the sampler's and torch's RNG states, the counters, the adaptive KL
  and entropy coefficients, the GAE ``next_done`` flags;
* ``envs.pkl`` (and ``tasks.json`` with a task sampler) — the envs where they stand
  (:meth:`llm_gym.stepping.EnvStepper.state_dict`: emulator snapshots with RNG, current observations, episode
  statistics; the sampler's state).

Checkpoints are taken between updates and written through ``Run.checkpoint`` (temp dir + rename), so a run
killed at any moment resumes from its newest complete one.
"""

from __future__ import annotations

import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from llm_gym.agents.ppo_lora.files import TRAINING_FILE
from llm_gym.agents.ppo_lora.model import ADAPTER_DIR, ActorCritic
from llm_gym.errors import CheckpointError
from llm_gym.runs import Run
from llm_gym.training import loop as training


@dataclass
class Counters(training.Counters):
    """The shared counters plus what ``ppo_lora`` tracks besides."""

    kl_coef: float = 0.0
    """The KL coefficient now (it moves with ``kl_target``)."""
    entropy_coef: float | None = None
    """The entropy bonus's coefficient now (it moves with ``entropy_target``); None in checkpoints written before it
    could move, which resume at the config's ``entropy_coef``."""
    sampled_eval_history: list[tuple[int, float, float]] = field(default_factory=list)
    """(env step, mean return, mean game score) of the sampled evaluation beside each greedy one."""
    exact_eval_history: list[tuple[int, float, float, float]] = field(default_factory=list)
    """``eval_exact``: (env step, exact expected return, win probability, loss probability) of each evaluation."""


def save_checkpoint(
    directory: Path,
    ac: ActorCritic,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator,
    counters: Counters,
    next_done: torch.Tensor,
    env_state: dict[str, Any],
) -> None:
    ac.save(directory)
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "counters": counters.state_dict(),
            "next_done": next_done.clone(),
        },
        directory / TRAINING_FILE,
    )
    training.save_envs(directory, env_state)


def load_checkpoint(
    directory: Path,
    ac: ActorCritic,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator,
) -> tuple[Counters, torch.Tensor, dict[str, Any]]:
    """Restore everything in place (the adapter was loaded when ``ac`` was built from ``directory/adapter``)."""
    try:  # a file that verifies can still hold the wrong things (rewritten with its manifest): one line
        ac.load_value_head(directory)
        data = torch.load(directory / TRAINING_FILE, map_location="cpu", weights_only=True)
        env_state = training.load_envs(directory)
        training.load_optimizer_state(optimizer, scheduler, data["optimizer"], data["scheduler"])  # --set lr
        generator.set_state(data["generator"])
        torch.set_rng_state(data["torch_rng"])
        return Counters.from_state_dict(data["counters"]), data["next_done"], env_state
    except (OSError, RuntimeError, pickle.UnpicklingError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"cannot resume from {directory}: {type(exc).__name__}: {exc}") from exc


def init_checkpoint(path: str) -> Path:
    """The checkpoint ``init_adapter`` names (a run directory gives its newest), checked to hold an adapter."""
    if not Path(path).exists():
        raise CheckpointError(
            f"init_adapter {path} does not exist (give an sft or ppo_lora checkpoint or run directory)"
        )
    _, checkpoint = Run.resolve_checkpoint(path)
    assert checkpoint is not None  # required=True raises instead
    adapter_dir(checkpoint)
    return checkpoint


def adapter_dir(checkpoint: Path) -> Path:
    path = Path(checkpoint) / ADAPTER_DIR
    if not (path / "adapter_config.json").is_file():
        raise CheckpointError(f"{checkpoint} holds no ppo_lora adapter ({ADAPTER_DIR}/adapter_config.json)")
    return path


REFERENCE_DIR = "reference_adapter"
"""In a run directory: the copy of the warm start's adapter that ``kl_reference=start`` measures the KL against."""


def reference_adapter(run_path: Path, init_adapter: str, resumed: bool) -> Path:
    """The warm start's adapter as the run's own copy: made at the first start (written whole, then renamed), so a
    resumed run reads what it started from even after the warm start's run has moved, gone on training or gone."""
    copy = Path(run_path) / REFERENCE_DIR
    if copy.is_dir():
        return copy
    if resumed:
        raise CheckpointError(
            f"{run_path} has no {REFERENCE_DIR}/: it was trained before kl_reference existed, with the KL measured "
            "against the base model; resume it with --set kl_reference=base"
        )
    partial = copy.with_name(copy.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(adapter_dir(init_checkpoint(init_adapter)), partial)
    partial.rename(copy)
    return copy
