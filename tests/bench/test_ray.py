"""The same suite on Ray workers lands the same episodes in the same store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llm_gym.bench.ray_runner import INSTALL_HINT, ray_module
from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite
from llm_gym.errors import LLMGymError


def test_ray_workers_store_every_episode_once(tiny_suite: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    suite = load_suite(tiny_suite)
    expected = {(s.entry, s.env_label, s.seed, s.task_id) for s in suite.episodes()}
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        report = run_suite(suite, store, ray=True, workers=2, record=True, progress=False)
        assert report.played == len(expected)
        rows = list(store.episodes())
        assert {(r.entry, r.env_label, r.seed, r.task_id) for r in rows} == expected
        assert len(store.trajectory_ids()) == len(rows)  # trajectories travel back from the workers too
        assert run_suite(suite, store, ray=True, workers=2, progress=False).played == 0


def test_without_ray_the_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without the extra looks like to import
    with pytest.raises(LLMGymError) as caught:
        ray_module()
    assert str(caught.value) == INSTALL_HINT and 'pip install "llm-gym[ray]"' in INSTALL_HINT
