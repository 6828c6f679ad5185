"""``llm-gym select``: every run plays the same validation games, the best mean is chosen, and only the chosen run's
games on disjoint test seeds are the score to report; bad input is one line. Real runs, real ALE games."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.nanogpt_ppo.testing import TINY_SETTINGS
from llm_gym.testing import error_line, invoke
from llm_gym.training.selection import Candidate, SeedBlock, select

ENV = "LLMBreakout-text-v0"
PLAY = ("--env-arg", "fire_on_reset=true", "--max-steps", "120")
SHORT = ("--set", "total_steps=8")  # a baseline's training only records how it plays


@pytest.fixture(scope="module")
def baseline_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs of three agents that learn nothing (their config is the policy): they play real, different games."""
    root = tmp_path_factory.mktemp("select")
    runs = {}
    for name, sets in {"scripted": [], "left": ["--set", "action=LEFT"], "noop": ["--set", "action=NOOP"]}.items():
        agent = "scripted" if name == "scripted" else "constant"
        result = invoke("train", "--agent", agent, "--env", ENV, *sets, *SHORT, "--run-dir", str(root / name))
        assert result.exit_code == 0, result.output
        runs[name] = root / name
    return runs


def returns_of_play(run: Path, seed: int, episodes: int) -> list[float]:
    result = invoke(
        "play", "--checkpoint", str(run), "--seed", str(seed), "--episodes", str(episodes), "--num-envs", "4",
        *PLAY, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return [e["return"] for e in json.loads(result.stdout)["episodes"]]


def test_the_best_validation_mean_is_chosen_and_its_test_games_are_plays_own(
    baseline_runs: dict[str, Path], tmp_path: Path
) -> None:
    runs = [baseline_runs[name] for name in ("noop", "scripted", "left")]
    out = tmp_path / "selection.json"
    result = invoke(
        "select", *map(str, runs), "--val-seed", "5000", "--val-episodes", "4", "--test-seed", "100",
        "--test-episodes", "4", "--num-envs", "4", *PLAY, "--out", str(out), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report

    validation = {run.name: returns_of_play(run, 5000, 4) for run in runs}
    means = {name: sum(r) / len(r) for name, r in validation.items()}
    assert len(set(means.values())) == 3, means  # the three policies play differently: a real choice
    best = max(means, key=means.get)
    rows = {row["label"]: row for row in report["candidates"]}
    assert set(rows) == {"noop", "scripted", "left"}  # labels relative to the folder the runs share
    for name, row in rows.items():
        assert row["validation"]["returns"] == validation[name]
        assert row["chosen"] == (name == best)
        assert (row["test"] is None) == (name != best)  # only the chosen run plays the test games
    assert report["chosen"] == best
    assert report["chosen_test"]["returns"] == returns_of_play(baseline_runs[best], 100, 4)
    assert report["validation_seeds"] == [5000, 5003] and report["test_seeds"] == [100, 103]


def test_test_all_plays_every_run_on_the_test_seeds_and_a_tie_goes_to_the_first_given(
    baseline_runs: dict[str, Path],
) -> None:
    # NOOP and a NOOP run given twice under another name cannot differ: a tie, which the first given wins.
    twin = baseline_runs["noop"].parent / "noop_twin"
    if not twin.exists():
        result = invoke(
            "train", "--agent", "constant", "--env", ENV, "--set", "action=NOOP", *SHORT, "--run-dir", str(twin)
        )
        assert result.exit_code == 0, result.output
    result = invoke(
        "select", str(twin), str(baseline_runs["noop"]), "--val-episodes", "2", "--test-episodes", "2",
        "--test-all", *PLAY, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["chosen"] == "noop_twin"
    assert all(row["test"] is not None for row in report["candidates"])


def test_a_sweep_directory_stands_for_its_runs_and_checkpoint_name_picks_each_runs_best(tmp_path: Path) -> None:
    sets = [x for k, v in {**TINY_SETTINGS, "total_steps": 64, "eval_every": 64}.items() for x in ("--set", f"{k}={v}")]
    result = invoke(
        "sweep", "--agent", "nanogpt_ppo", "--env", "LLMPong-ascii-v0", "--seeds", "0,1", *sets,
        "--runs-root", str(tmp_path), "--name", "s",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = invoke(
        "select", str(tmp_path / "s"), "--checkpoint-name", "best", "--val-episodes", "1", "--test-episodes", "1",
        "--max-steps", "30", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [row["label"] for row in report["candidates"]] == ["default__seed_0@best", "default__seed_1@best"]
    # The grid the runs trained on travels with their policies (as in `play`): no note says it was left out.
    assert "fire_on_reset=true" in result.stderr and "rows=" not in result.stderr
    assert report["chosen_test"]["returns"] and len(report["chosen_test"]["returns"]) == 1

    line = error_line(invoke("select", str(tmp_path / "s"), "--checkpoint-name", "step_7"))
    assert "has no checkpoint 'step_7' (it has best, step_64)" in line and "--checkpoint-name latest" in line


def test_bad_input_is_one_line_that_says_what_to_do(baseline_runs: dict[str, Path], tmp_path: Path) -> None:
    a, b = str(baseline_runs["scripted"]), str(baseline_runs["left"])
    line = error_line(invoke("select", a, b, "--val-seed", "100", "--test-seed", "104"))
    assert "validation seeds 100-107 and test seeds 104-111 overlap" in line and "--test-seed past 107" in line
    assert "at least two candidates" in error_line(invoke("select", a))
    assert "given twice" in error_line(invoke("select", a, a))
    line = error_line(invoke("select", a, b, "--by", "best"))
    assert "--by takes mean or median, got 'best'" in line
    assert "must name a .json file" in error_line(invoke("select", a, b, "--out", str(tmp_path / "x.txt")))
    assert "is not a run directory" in error_line(invoke("select", a, str(tmp_path)))

    pong = tmp_path / "pong"
    assert (
        invoke("train", "--agent", "scripted", "--env", "LLMPong-text-v0", *SHORT, "--run-dir", str(pong)).exit_code
        == 0
    )
    line = error_line(invoke("select", a, str(pong)))
    assert "trained on different envs" in line and "pass --env ID" in line
    line = error_line(invoke("select", a, b, "--set", "learning_rat=1"))
    assert "learning_rat" in line


def test_by_median_passes_over_one_outlying_game_that_wins_the_mean() -> None:
    # Validation games as Breakout gave them (issue 15): one policy's 281-point game among 7-11s wins the mean.
    games = {"outlier": [10, 8, 8, 11, 281, 7, 10, 8], "steady": [22, 16, 15, 18, 21, 12, 14, 27]}
    candidates = [Candidate(name, Path(name), None) for name in games]

    def play(candidate: Candidate, block: SeedBlock) -> list[float]:
        return [float(x) for x in games[candidate.label]][: block.episodes]

    validation, test = SeedBlock(10_000, 8), SeedBlock(100, 8)
    by_mean, by_median = (select(candidates, validation, test, play, by=by) for by in ("mean", "median"))
    assert by_mean.chosen_candidate.label == "outlier" and by_median.chosen_candidate.label == "steady"
    report = by_median.as_dict()
    assert report["chosen_by"] == "median"
    assert [row["validation"]["median_return"] for row in report["candidates"]] == [9.0, 17.0]


def test_by_median_from_the_command_line_reports_its_rule(baseline_runs: dict[str, Path]) -> None:
    runs = [str(baseline_runs[name]) for name in ("noop", "scripted")]
    result = invoke(
        "select", *runs, "--by", "median", "--val-episodes", "2", "--test-episodes", "2", *PLAY, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["chosen_by"] == "median" and report["chosen"] == "scripted"
    assert all("median_return" in row["validation"] for row in report["candidates"])
