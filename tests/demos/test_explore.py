"""Demonstrations with noise injection (``record_demos(explore=P)``, ``llm-gym demos --explore P``) on real Kuhn
poker: the env steps with a random legal action after about P of the decisions while every line keeps the
demonstrator's answer, so the exact best response labels the positions its own play never reaches; the same seed
writes the same file; bad values and envs without legal actions to draw are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.cli import build_app
from llm_gym.demos import read_demos
from llm_gym.demos.record import record_demos
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent

KUHN = EnvConfig("OpenSpiel-kuhn_poker-v0")
FIRST_SEAT_FACING_A_BET = "player 0 (you): Pass, player 1: Bet"


def _answers(path: Path) -> dict[str, set[str]]:
    """Each observation's answers over the file."""
    answers: dict[str, set[str]] = {}
    for record in read_demos(path):
        answers.setdefault(record.messages[1]["content"], set()).add(record.answer)
    return answers


def test_explored_games_reach_new_positions_and_keep_the_demonstrators_answers(tmp_path: Path) -> None:
    best_response = get_agent("best_response")().policy(KUHN)
    plain = record_demos(best_response, KUHN, 200, tmp_path / "plain.jsonl", source={"agent": "best_response"})
    noisy = record_demos(
        best_response, KUHN, 200, tmp_path / "noisy.jsonl", source={"agent": "best_response"}, explore=0.5
    )
    assert plain.explored == 0
    assert 0.35 * noisy.decisions < noisy.explored < 0.65 * noisy.decisions
    seen, explored = _answers(tmp_path / "plain.jsonl"), _answers(tmp_path / "noisy.jsonl")
    assert all(len(answers) == 1 for answers in explored.values())  # the demonstrator's answer, whatever was played
    for observation, answers in seen.items():
        assert explored.get(observation, answers) == answers

    # The first seat facing a bet after its own pass: the best response passes first only with the king, so with the
    # jack or the queen that position is never in its own games; the random passes reach it, and it is labelled.
    def facing_a_bet(answers: dict[str, set[str]]) -> dict[str, set[str]]:
        return {o.split("Your card: ")[1][0]: a for o, a in answers.items() if FIRST_SEAT_FACING_A_BET in o}

    assert facing_a_bet(seen) == {"K": {"Bet"}}
    assert facing_a_bet(explored) == {"J": {"Pass"}, "Q": {"Bet"}, "K": {"Bet"}}  # it folds the jack
    # Returns are those of the games played: random actions cost the demonstrator chips.
    assert sum(noisy.returns) / len(noisy.returns) < sum(plain.returns) / len(plain.returns)


@pytest.mark.parametrize("explore", [-0.1, 1.0])
def test_explore_outside_0_1_is_refused(tmp_path: Path, explore: float) -> None:
    with pytest.raises(ConfigError, match=r"explore is a probability per decision in \[0, 1\)"):
        record_demos(get_agent("random")().policy(KUHN), KUHN, 1, tmp_path / "d.jsonl", source={}, explore=explore)


def test_the_cli_records_explore_in_every_line_and_repeats_itself(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["demos", "--agent", "best_response", "--env", "OpenSpiel-kuhn_poker-v0", "--episodes", "40",
            "--num-envs", "4", "--explore", "0.3", "--json"]  # fmt: skip
    first = runner.invoke(build_app(), [*args, "--out", str(tmp_path / "a.jsonl")])
    assert first.exit_code == 0, first.output
    report = json.loads(first.output[first.output.index("{") :])
    assert report["explored_decisions"] > 0
    records = read_demos(tmp_path / "a.jsonl")
    assert len(records) == report["decisions"] and {r.source["explore"] for r in records} == {0.3}
    again = runner.invoke(build_app(), [*args, "--out", str(tmp_path / "b.jsonl")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--env", "Trace-v0", "--explore", "0.3"], "ground truth has none"),
        (["--agent", "solver", "--env", "OpenSpiel-tic_tac_toe-v0", "--all-replies", "--explore", "0.3"],
         "--explore does not apply: drop it"),
    ],
)  # fmt: skip
def test_explore_where_it_cannot_apply_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "demos.jsonl"
    result = CliRunner().invoke(build_app(), ["demos", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert needle in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not out.exists()
