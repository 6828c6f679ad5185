"""The ``nanogpt_ppo`` config: a frozen dataclass with a docstring under each field, plus three named presets.

``preset`` picks a full set of values; any field given explicitly (``--set n_layer=4``) overrides it. Fields a
preset fills default to ``None`` ("from the preset"), so a saved config names only what the user chose and
``--set preset=reference`` on it still switches every other field. :meth:`NanoGPTPPOConfig.resolved` returns the
same config with every ``None`` filled in from the preset; the training loop reads only that. PPO's fields are
declared once for every PPO agent (:class:`llm_gym.training.config.PPOConfig`); this config gives those a preset
fills the default None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from llm_gym.config import speed_only, training_only
from llm_gym.training.config import PPOConfig

PRESETS: dict[str, dict[str, Any]] = {
    # RL_Driven_nanoGPT (train_ppo.py) as the issue lists it: one env, a 24 x 80 grid read as 24 * 81 = 1944
    # tokens (1943 characters + our query token), 6 x 6 x 96 with the original's MLP expansion of 1.
    "reference": {
        "grid_rows": 24,
        "grid_cols": 80,
        "n_layer": 6,
        "n_head": 6,
        "n_embd": 96,
        "mlp_ratio": 1,
        "positions": "absolute",
        "query_summary": False,
        "key_frequency_bias": False,
        "num_envs": 1,
        "num_steps": 1024,
        "minibatch_size": 64,
        "update_epochs": 10,
        "clip_coef": 0.2,
        "value_clip_coef": 0.2,
        "value_coef": 1.0,
        "entropy_coef": 0.01,
        "max_grad_norm": 0.5,
        "learning_rate": 1e-4,
        "final_learning_rate": 5e-5,
        "adam_beta2": 0.95,
        "life_loss_terminal": False,
        "reward_clip": 0.0,
    },
    # Chosen by measurement for learning per CPU second on 2 cores (docs/guides/nanogpt_ppo.md has the numbers).
    "cpu": {
        "grid_rows": 12,
        "grid_cols": 20,
        "n_layer": 1,
        "n_head": 4,
        "n_embd": 64,
        "mlp_ratio": 4,
        "positions": "line_column",
        "query_summary": True,
        "key_frequency_bias": False,
        "num_envs": 8,
        "num_steps": 128,
        "minibatch_size": 256,
        "update_epochs": 4,
        "clip_coef": 0.2,
        "value_clip_coef": 0.2,
        "value_coef": 1.0,
        "entropy_coef": 0.01,
        "max_grad_norm": 0.5,
        "learning_rate": 5e-4,
        "final_learning_rate": 5e-5,
        "adam_beta2": 0.99,
        "life_loss_terminal": True,
        "reward_clip": 1.0,
    },
}
# The default since 2026-11-25: `cpu` with a rollout twice as large and attention that starts even over kinds of
# character. On Breakout at 1M env steps on one machine: 4 of 6 seeds at or above the human score on held-out games
# (mean 31.8), where the four seeds also run with key_frequency_bias and 8 envs ended at 19.7-23.8
# (docs/results/nanogpt_breakout.md); 0.91x the env steps per CPU second. A new name rather than a changed `cpu`, so a
# saved run (its config.json names its preset) resumes on the values it started with.
PRESETS["cpu16"] = {**PRESETS["cpu"], "key_frequency_bias": True, "num_envs": 16}
"""Named sets of values for every field that defaults to ``None``."""


@dataclass(frozen=True, kw_only=True)
class NanoGPTPPOConfig(PPOConfig):
    """Config of the ``nanogpt_ppo`` agent (``None`` = take the value from ``preset``)."""

    first_fields: ClassVar[tuple[str, ...]] = ("total_steps", "seed", "preset", "num_envs", "learning_rate",
        "eval_every", "eval_episodes", "device", "threads")  # fmt: skip
    """The fields `llm-gym agents` shows first."""

    renamed: ClassVar[Mapping[str, str]] = {
        "lr": "learning_rate",
        "lr_end": "final_learning_rate",
        "epochs": "update_epochs",
        "rollout_steps": "num_steps",
        "torch_threads": "threads",
    }

    total_steps: int = training_only(1_000_000)
    """Environment steps to train for, summed over parallel envs."""
    preset: Literal["cpu16", "cpu", "reference"] = "cpu16"
    """Named set of values for every field left at None: `cpu16` (`cpu` with 16 envs and key_frequency_bias; the default), `cpu` (small grid and model, fast on a CPU) or `reference` (the original RL_Driven_nanoGPT setup)."""

    # -- observation -------------------------------------------------------------------------------------------
    grid_rows: int | None = None
    """Rows of the character grid, passed as `rows` to envs that take it (the ASCII Atari views); 0 keeps the env's own."""
    grid_cols: int | None = None
    """Columns of the character grid, passed as `cols` to envs that take it; 0 keeps the env's own."""
    context: int = 0
    """Tokens per observation, query token included; 0 = the env's longest observation + 1. Longer texts keep their end."""

    # -- model -------------------------------------------------------------------------------------------------
    n_layer: int | None = None
    """Transformer blocks."""
    n_head: int | None = None
    """Attention heads per block (must divide n_embd)."""
    n_embd: int | None = None
    """Width of the residual stream."""
    mlp_ratio: int | None = None
    """Hidden width of each MLP as a multiple of n_embd (nanoGPT: 4; the original RL_Driven_nanoGPT: 1)."""
    positions: Literal["absolute", "line_column"] | None = None
    """Position embeddings: `absolute` (one per index, as nanoGPT) or `line_column` (line + column, counted from newlines)."""

    query_summary: bool | None = None
    """Give the query token the channel-wise max of the embeddings before it, so the heads see a rare character (the ball) from the start."""
    key_frequency_bias: bool | None = None
    """Lower each attention key's score by a learned multiple (from 1) of the log of how often its character occurs, so attention starts even over kinds of character rather than positions."""

    # -- PPO (PPOConfig's fields, from the preset) ---------------------------------------------------------------
    num_envs: int | None = None
    num_steps: int | None = None
    update_epochs: int | None = None
    minibatch_size: int | None = None
    clip_coef: float | None = None
    value_clip_coef: float | None = None
    value_coef: float | None = None
    entropy_coef: float | None = None
    max_grad_norm: float | None = None
    learning_rate: float | None = None

    # -- rollouts ----------------------------------------------------------------------------------------------
    vector_env: Literal["sync", "async"] = training_only("sync")
    """`sync` steps the envs in this process; `async` gives each env its own process (pays off with spare cores)."""
    start_spread: int = training_only(0)
    """Before the first rollout, env i plays a uniform draw of 0..start_spread uniformly random legal actions (not
    learnt from, not counted in total_steps), so that the envs stand at different points of their games rather than
    all at an opening (docs/guides/ppo_lora.md, start_spread). 0: no spread. Not with a curriculum; ignored on resume."""
    life_loss_terminal: bool | None = training_only(None)
    """Treat the loss of a life as the end of an episode for value bootstrapping (the env keeps playing)."""
    reward_clip: float | None = training_only(None)
    """Clip training rewards to [-reward_clip, reward_clip]; 0 = no clipping. Evaluation always reports the game's own returns."""

    # -- optimiser ---------------------------------------------------------------------------------------------
    final_learning_rate: float | None = training_only(None)
    """Learning rate the cosine schedule ends at (at total_steps): a rate, not a fraction of learning_rate as
    min_lr_ratio is (a preset's end stays where it is when --set learning_rate moves the start)."""
    adam_beta2: float | None = training_only(None)
    """Adam beta2 (beta1 is 0.9)."""

    # -- evaluation and checkpoints ----------------------------------------------------------------------------
    eval_every: int = training_only(50_000)
    """Evaluate (greedy actions) every this many env steps, and at the end; 0 = only at the end."""
    eval_at_start: bool = training_only(True)
    """Also evaluate the untrained network before the first update (on the same seeds as every later evaluation),
    so a run's summary holds its own before and after."""
    eval_episodes: int = training_only(8)
    """Episodes per evaluation (the same seeds every time, so evaluations compare)."""
    eval_max_steps: int = training_only(4_500)
    """Cut an evaluation episode after this many steps (4,500 steps = 18,000 Atari frames, the 5 minutes of play of
    the DQN evaluation protocol; a greedy policy that never serves the ball would otherwise never end)."""
    eval_epsilon: float = training_only(0.0)
    """Probability of a random legal action in evaluation instead of the greedy one (0 = purely greedy; the DQN protocol uses 0.05)."""
    checkpoint_every: int = training_only(50_000)
    """Write a resumable checkpoint every this many env steps, and at the end."""
    keep_checkpoints: int = training_only(3)
    """Step checkpoints to keep (the best one is kept apart, as checkpoints/best)."""

    # -- machine -----------------------------------------------------------------------------------------------
    device: str = "cpu"
    """Torch device: `cpu`, `cuda`, `cuda:1`, ..."""
    threads: int = speed_only(0)
    """Threads torch may use; 0 = torch's default (one per core). Set 1 when sharing a small machine."""
    progress: bool = training_only(True)
    """Show a progress bar."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        positive = (
            "n_layer",
            "n_head",
            "n_embd",
            "mlp_ratio",
            "num_envs",
            "num_steps",
            "update_epochs",
            "minibatch_size",
        )
        for name in positive:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        for name in ("context", "grid_rows", "grid_cols", "eval_every", "eval_episodes", "checkpoint_every",
                     "start_spread"):  # fmt: skip
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.eval_episodes < 1:
            raise ValueError("eval_episodes must be at least 1")
        if not 0.0 <= self.eval_epsilon <= 1.0:
            raise ValueError(f"eval_epsilon is a probability, got {self.eval_epsilon}")

    def resolved(self) -> NanoGPTPPOConfig:
        """This config with every field left at None taken from the preset: no field of it is None."""
        preset = PRESETS[self.preset]
        return dataclasses.replace(self, **{k: v for k, v in preset.items() if getattr(self, k) is None})

    @property
    def rollout_size(self) -> int:
        """Samples per rollout (num_envs * num_steps) of the resolved config."""
        cfg = self.resolved()
        return cfg.num_envs * cfg.num_steps

    @property
    def num_updates(self) -> int:
        """Updates needed to reach total_steps (the last rollout may overshoot it)."""
        return max(1, -(-self.total_steps // self.rollout_size))
