"""SampledTasks: a sampler in front of a real env (OpenSpiel tic-tac-toe and kuhn poker)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.sampled_tasks import SampledTasks, restore_sampler, sampler_state, saved_options
from llm_gym.tasks import TaskRange, UniformTaskSampler

KUHN = 2_400_000_000


class Recording(UniformTaskSampler):
    def __init__(self) -> None:
        super().__init__(TaskRange(KUHN, KUHN + 9), {"opponent": "random"}, seed=0)
        self.reports: list[tuple[dict | None, Mapping[str, Any]]] = []

    def report(self, options, stats) -> None:
        super().report(options, stats)
        self.reports.append((options, dict(stats)))


def play_out(env: SampledTasks, rng: random.Random) -> dict:
    _, info = env.reset(seed=rng.randrange(1000))
    while True:
        _, _, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
        if terminated or truncated:
            return info


def test_every_episode_draws_its_task_and_is_reported_with_its_stats() -> None:
    sampler = Recording()
    env = SampledTasks(OpenSpielEnv(), sampler)
    rng = random.Random(0)
    finals = [play_out(env, rng) for _ in range(5)]
    assert len(sampler.reports) == 5
    for (options, stats), final in zip(sampler.reports, finals, strict=True):
        assert KUHN <= options["task_id"] <= KUHN + 9 and options["opponent"] == "random"
        assert final["task_id"] == options["task_id"] and final["game"] == "kuhn_poker"
        assert stats["score"] == final["score"] and stats["success"] == float(final["success"])
        assert stats["return"] == final["game_return"] and stats["length"] >= 1 and stats["truncated"] == 0.0


def test_caller_options_win_and_a_cut_episode_is_reported() -> None:
    sampler = Recording()
    env = SampledTasks(OpenSpielEnv(), sampler)
    _, info = env.reset(seed=0, options={"task_id": 2_200_000_000})  # the caller chooses: no draw
    assert (
        info["game"] == "tic_tac_toe" and sampler.rng.getstate() == UniformTaskSampler(TaskRange(0, 1)).rng.getstate()
    )
    env.step(info["legal_actions"][0])
    env.reset(seed=1)  # cut after one move by the caller
    ((options, stats),) = sampler.reports
    assert options == {"task_id": 2_200_000_000} and stats["truncated"] == 1.0 and stats["length"] == 1
    assert "score" not in stats  # nothing final to read


def test_state_round_trip_restores_sampler_and_episode() -> None:
    sampler = Recording()
    env = SampledTasks(OpenSpielEnv(), sampler)
    _, info = env.reset(seed=0)
    env.step(info["legal_actions"][0])
    state = sampler_state(sampler, [env])
    assert saved_options(state) == [env.options]
    expected = [sampler.next_options() for _ in range(3)]

    other_sampler = Recording()
    other = SampledTasks(OpenSpielEnv(), other_sampler)
    other.reset(seed=5)  # a throwaway reset draws; the restore forgets it
    restore_sampler(other_sampler, [other], state)
    assert other.options == env.options and other.stats == env.stats and other.open
    assert [other_sampler.next_options() for _ in range(3)] == expected
