"""Run directories: where a training run keeps its config, logs and checkpoints.

* :mod:`~llm_gym.runs.run`: :class:`Run`, one ``runs/<env>__<agent>__<seed>__<time>/`` directory, and how to find
  the run and checkpoint a path names;
* :mod:`~llm_gym.runs.checkpoint_files`: a checkpoint's manifest (size and SHA-256 of every file) and its check;
* :mod:`~llm_gym.runs.lock`: one writer per run directory;
* :mod:`~llm_gym.runs.model_card`: the model card written into every checkpoint;
* :mod:`~llm_gym.runs.trackers`: where the scalars go (TensorBoard, W&B).
"""

from llm_gym.runs.checkpoint_files import MANIFEST_FILE, verify_checkpoint
from llm_gym.runs.run import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    SUMMARY_FILE,
    Run,
    default_run_name,
    find_run_dir,
    played_history,
    read_summary,
    trained_env_kwargs,
)

__all__ = [
    "CHECKPOINTS_DIR",
    "CONFIG_FILE",
    "MANIFEST_FILE",
    "SUMMARY_FILE",
    "Run",
    "default_run_name",
    "find_run_dir",
    "played_history",
    "read_summary",
    "trained_env_kwargs",
    "verify_checkpoint",
]
