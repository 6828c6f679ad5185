from __future__ import annotations

from dataclasses import replace

import pytest

from llm_gym.bench.store import EpisodeRow
from llm_gym.bench.summary import normalised, rung_of, summarise

BASE = EpisodeRow(
    suite="s", split="heldout", entry="a", entry_hash="h", agent="random", checkpoint_hash=None,
    env_label="ttt-mcts", game="tic_tac_toe", env_id="OpenSpiel-tic_tac_toe-v0",
    env_args='{"mcts": {"simulations": 10}, "opponent": "mcts"}', env_hash="e", task_id=None, seed=0,
    episode_return=0.0, raw_return=0.0, score=0.5, length=5, truncated=False, invalid_actions=0, decisions=5,
    tokens=None, wall_seconds=0.1, llm_gym_version="0.1.0", final_info={},
)  # fmt: skip


def test_win_draw_loss_and_rung_come_from_the_scores() -> None:
    rows = [replace(BASE, id=i + 1, seed=i, score=s) for i, s in enumerate([1.0, 1.0, 0.5, 0.0])]
    board = summarise("s", rows, {})
    cell = board.cells[("a", "ttt-mcts", "heldout")]
    assert (cell.wins, cell.draws, cell.losses) == (2, 1, 1)
    assert cell.win_rate.value == 0.5 and cell.win_rate.n == 4
    assert board.envs[0].rung == "mcts-10" and rung_of({}) == "random"


def test_atari_rows_are_human_normalised_on_the_raw_return() -> None:
    pong = replace(BASE, env_id="LLMPong-text-v0", raw_return=-3.05, episode_return=-2.0, score=2.0)
    assert normalised(pong) == pytest.approx(0.5)
    assert normalised(replace(BASE, env_id="Trace-v0", score=0.25)) == 0.25


def test_only_the_newest_identity_of_an_entry_counts() -> None:
    old = [replace(BASE, id=i + 1, seed=i, entry_hash="old", score=0.0) for i in range(3)]
    new = [replace(BASE, id=10 + i, seed=i, entry_hash="new", score=1.0) for i in range(2)]
    board = summarise("s", old + new, {})
    cell = board.cells[("a", "ttt-mcts", "heldout")]
    assert cell.win_rate.n == 2 and cell.wins == 2
    assert board.aggregates[0].iqm.value == 1.0 and board.aggregates[0].games == 1


def test_gain_over_zero_shot_compares_each_env_with_the_zero_shot_entry_that_played_it() -> None:
    """Two zero-shot entries of one model (score mode on games, generate mode on Trace): a trained entry's gain on
    a game compares with the score-mode one, whichever of them comes last in the store."""
    rows, n = [], 0
    for entry, label, score in (
        ("zero-score", "ttt-mcts", 0.25),
        ("trained", "ttt-mcts", 0.75),
        ("zero-generate", "trace-1", 0.0),
    ):
        for seed in range(4):
            n += 1
            rows.append(replace(BASE, id=n, seed=seed, entry=entry, env_label=label, entry_hash=entry, score=score))
    model = {"model": "smollm2-135m"}
    info = {
        ("zero-score", "zero-score"): {"agent": "lm", "config": model, "checkpoint": None},
        ("zero-generate", "zero-generate"): {"agent": "lm", "config": model, "checkpoint": None},
        ("trained", "trained"): {"agent": "sft", "config": model, "checkpoint": "runs/x"},
    }
    board = summarise("s", rows, info)
    assert board.zero_shot_gain == {"trained": pytest.approx(0.5)}
