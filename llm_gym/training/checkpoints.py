"""The policy a checkpoint holds: which agent made it, with which settings, and loading it with one clear error.

:func:`load_policy` is what ``llm-gym play --checkpoint`` and a bench checkpoint entry call; :func:`checkpoint_config`
applies the settings a player changes (checked by :mod:`llm_gym.training.setting_checks`); :func:`load_problem` is
``train --resume``'s check that a checkpoint that verifies also loads.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from llm_gym.agent import Agent, AgentConfig, EnvConfig, Policy
from llm_gym.config import apply_overrides, from_dict
from llm_gym.errors import CheckpointError, LLMGymError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run
from llm_gym.training.setting_checks import check_checkpoint_settings


def load_policy(
    checkpoint: str | Path, env: EnvConfig | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[Policy, Agent]:
    """The policy saved in a checkpoint (or in a run directory's newest checkpoint), with the agent that made it;
    ``overrides`` (``--set`` of ``llm-gym play``) change how it plays, e.g. ``threads`` or ``quantize``."""
    run, path = Run.resolve_checkpoint(checkpoint, required=False)
    agent_cls, config = checkpoint_config(run, overrides)
    agent = agent_cls(config)
    if path is None and agent.learns:
        raise CheckpointError(f"{run.path} has no complete checkpoint yet")
    saved = run.read_config()
    env = env or EnvConfig(saved["env_id"], saved.get("env_kwargs", {}))
    if path is None:  # an agent that learns nothing: nothing is read from the checkpoint
        return agent.policy(env, Path(checkpoint)), agent
    with loading(path):
        return agent.policy(env, path), agent


def load_problem(agent: Agent, env: EnvConfig, checkpoint: Path) -> str | None:
    """Why ``checkpoint`` (one that verifies) cannot be resumed from, or None: its policy must load, and every
    torch file in it must hold a table of tensors and values (what the agents save), not zeros or another format."""
    try:
        with loading(checkpoint):
            for path in sorted(checkpoint.rglob("*.pt")):
                import torch  # `import llm_gym` loads this module and must not load torch

                if not isinstance(torch.load(path, map_location="cpu", weights_only=True), dict):
                    raise ValueError(f"{path.name} holds no table")
            agent.policy(env, checkpoint)
    except CheckpointError as exc:
        return str(exc).removeprefix(f"checkpoint {checkpoint} ")
    return None


@contextlib.contextmanager
def loading(checkpoint: Path) -> Iterator[None]:
    """Turn a checkpoint file that verifies but does not load (zeroed, another model's keys, a manifest rewritten
    over it) into one :class:`~llm_gym.errors.CheckpointError` naming the checkpoint, instead of the traceback of
    whichever library read it."""
    try:
        yield
    except (LLMGymError, MemoryError, ImportError):
        raise
    except Exception as exc:
        first = re.split(r"(?<=\w)\. ", (str(exc).strip().splitlines() or [""])[0])[0][:160]
        raise CheckpointError(
            f"checkpoint {checkpoint} cannot be loaded ({type(exc).__name__}: {first}); its files match its "
            "manifest, so they were saved that way or the manifest was rewritten: use another checkpoint"
        ) from exc


def checkpoint_config(
    run: Run, overrides: Mapping[str, Any] | None = None, source: str = "--set"
) -> tuple[type[Agent], AgentConfig]:
    """The agent class a run trained and its saved config with ``overrides`` applied: how its checkpoints play
    (``--set`` of ``llm-gym play --checkpoint``, ``set`` of a bench suite's checkpoint entry). An unknown or mistyped
    key raises one line naming ``source`` and the close matches."""
    saved = run.read_config()
    agent_cls = get_agent(saved["agent"])
    config = from_dict(agent_cls.Config, saved["config"], source=str(run.path / "config.json"))
    if not overrides:
        return agent_cls, config
    played = apply_overrides(config, overrides, source=source)
    check_checkpoint_settings(agent_cls, config, played, checkpoint=run.path, run=run.path, where=source)
    return agent_cls, played
