"""``llm-gym play --task-ids --opponent``: which tasks are played and the per-game report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llm_gym.cli import build_app
from llm_gym.cli.task_report import episode_task_ids
from llm_gym.envs.tasks import TaskRange
from llm_gym.stats import wilson_ci95


def test_small_ranges_are_played_in_order_large_ones_drawn() -> None:
    assert episode_task_ids(TaskRange(5, 7), 7, seed=0) == [5, 6, 7, 5, 6, 7, 5]
    drawn = episode_task_ids(TaskRange(0, 10**9), 5, seed=3)
    assert drawn == episode_task_ids(TaskRange(0, 10**9), 5, seed=3) and len(set(drawn)) == 5


def test_wilson_interval() -> None:
    low, high = wilson_ci95(0, 10)  # no wins in 10: the upper end is about 0.28, not 0
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-3)
    low, high = wilson_ci95(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)


def test_play_reports_win_rate_and_score_per_game() -> None:
    args = ["play", "--agent", "random", "--env", "OpenSpiel-v0", "--task-ids", "2200000000-2200000001"]
    result = CliRunner().invoke(build_app(), [*args, "--opponent", "mcts", "--episodes", "4", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [e["task_id"] for e in report["episodes"]] == [2200000000, 2200000001] * 2
    (row,) = report["per_game"]  # both ids are tic-tac-toe (one config variant)
    assert row["game"] == "tic_tac_toe" and row["episodes"] == 4
    assert 0.0 <= row["win_rate_ci95"][0] <= row["win_rate"] <= row["win_rate_ci95"][1] <= 1.0
    assert 0.0 <= row["mean_score"] <= 1.0


def test_bad_task_range_is_one_line() -> None:
    args = ["play", "--agent", "random", "--env", "OpenSpiel-v0", "--task-ids", "9-3"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 2 and "task range 9-3 is empty" in result.output
