"""nanogpt_ppo runs small enough for a test on two CPU cores: the settings such tests share (``--set`` keys)."""

from __future__ import annotations

from typing import Any

TINY_SETTINGS: dict[str, Any] = {
    "n_layer": 1,
    "n_head": 2,
    "n_embd": 16,
    "mlp_ratio": 2,
    "num_envs": 2,
    "num_steps": 32,
    "minibatch_size": 32,
    "update_epochs": 2,
    "eval_episodes": 1,
    "eval_max_steps": 40,
    "threads": 1,
    "progress": False,
}
"""A one-layer, 16-wide model, 2 envs x 32 steps per update, one short evaluation episode, no progress bar."""
