"""PPO-LoRA runs small enough for a test on two CPU cores: the settings every such test shares, and one call that
trains a config into a fresh run directory (the way ``llm-gym train`` does). Tests state only what they vary."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.config import to_dict
from llm_gym.runs import Run


def tiny_settings(model: str | Path | None = None, **overrides: Any) -> dict[str, Any]:
    """Settings (``--set`` keys) of a test-sized run: float32 on one thread, one trainable layer, no evaluation
    episodes, no progress bar, and the critic with the clipped loss (advantage=gae, policy_loss=clip: what most
    tests exercise, the value head included, on any number of envs; the group tests set their own); ``model`` None
    keeps the config's default model. ``overrides`` win."""
    base: dict[str, Any] = dict(
        dtype="float32", threads=1, trainable_layers=1, eval_episodes=0, progress=False, advantage="gae",
        policy_loss="clip",
    )  # fmt: skip
    if model is not None:
        base["model"] = str(model)
    return {**base, **overrides}


def tiny_config(model: str | Path | None = None, **overrides: Any) -> PPOLoRAConfig:
    """``tiny_settings`` as a config."""
    return PPOLoRAConfig(**tiny_settings(model, **overrides))


def train(run_dir: Path, env: str | EnvConfig, config: PPOLoRAConfig) -> tuple[dict, Run]:
    """Train ``config`` on ``env`` (an id, or an id with env arguments) into a new run at ``run_dir``, as
    ``llm-gym train`` does; returns the summary and the (closed) run."""
    env = env if isinstance(env, EnvConfig) else EnvConfig(env)
    run = Run.create(env.env_id, "ppo_lora", to_dict(config), path=run_dir, env_kwargs=env.kwargs)
    try:
        return PPOLoRAAgent(config).train(env, run), run
    finally:
        run.close()


def resume_as_if_killed(run_dir: Path, dest: Path, keep: str, env: str | EnvConfig, config: PPOLoRAConfig) -> dict:
    """Copy ``run_dir`` to ``dest`` as if the run had been killed right after its checkpoint ``keep`` (the later
    checkpoints and the summary removed), then ``--resume`` it to the end; returns the resumed run's summary."""
    env = env if isinstance(env, EnvConfig) else EnvConfig(env)
    shutil.copytree(run_dir, dest)
    step = int(keep.split("_")[1])
    for later in (dest / "checkpoints").glob("step_*"):
        if int(later.name.split("_")[1]) > step:
            shutil.rmtree(later)
    (dest / "summary.json").unlink()
    run = Run.open(dest)
    run.resumed_from = run.latest_checkpoint()
    assert run.resumed_from is not None and run.resumed_from.name == keep
    try:
        return PPOLoRAAgent(config).train(env, run)
    finally:
        run.close()
