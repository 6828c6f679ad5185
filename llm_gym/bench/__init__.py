"""``llm-gym bench``: suites of envs x entries x seeds, a SQLite episode store, a generated leaderboard.

Modules, one concern each: :mod:`~llm_gym.bench.suite` (TOML suites), :mod:`~llm_gym.bench.store` (SQLite),
:mod:`~llm_gym.bench.entries` (policies and identity hashes), :mod:`~llm_gym.bench.runner` (what is missing, playing
it), :mod:`~llm_gym.bench.ray_runner` (the same on Ray), :mod:`~llm_gym.bench.recording` (tallies and
trajectories), :mod:`~llm_gym.bench.stats` (CIs, IQM), :mod:`~llm_gym.bench.summary` and
:mod:`~llm_gym.bench.render` (the leaderboard), :mod:`~llm_gym.bench.machine` (the CPU beside a timing).
"""

from llm_gym.bench.runner import BenchReport, run_suite
from llm_gym.bench.store import EpisodeStore, StoreError
from llm_gym.bench.suite import Suite, load_suite, suite_names

__all__ = ["BenchReport", "EpisodeStore", "StoreError", "Suite", "load_suite", "run_suite", "suite_names"]
