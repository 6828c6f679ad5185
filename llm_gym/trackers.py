"""The old place of :mod:`llm_gym.runs.trackers` (where a run's scalars go), kept importable for processes started
before the move that import it lazily; new code imports ``llm_gym.runs.trackers``."""

from llm_gym.runs.trackers import TensorBoardTracker, Tracker, WandbTracker, open_trackers

__all__ = ["TensorBoardTracker", "Tracker", "WandbTracker", "open_trackers"]
