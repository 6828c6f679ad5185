"""The ranking rule: entries are ranked against each other only on envs every one of them played; entries that played
different games are never ranked against each other (the issue's cases: a zero-shot Trace entry above `random`, a
one-game Breakout learner above MCTS over eight OpenSpiel games)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llm_gym.bench.comparisons import SUITE
from llm_gym.bench.render.tables import comparison_tables
from llm_gym.bench.store import EpisodeRow
from llm_gym.bench.summary import summarise

ROW = EpisodeRow(
    suite="s", split="heldout", entry="a", entry_hash="h", agent="random", checkpoint_hash=None,
    env_label="ttt", game="tic_tac_toe", env_id="OpenSpiel-tic_tac_toe-v0", env_args="{}", env_hash="e",
    task_id=None, seed=0, episode_return=0.0, raw_return=0.0, score=0.5, length=5, truncated=False,
    invalid_actions=0, decisions=5, tokens=None, wall_seconds=0.1, llm_gym_version="0.1.0", final_info={},
)  # fmt: skip

ENVS = {  # label -> (env id, game)
    "breakout": ("LLMBreakout-text-v0", "breakout"),
    "ttt": ("OpenSpiel-tic_tac_toe-v0", "tic_tac_toe"),
    "kuhn": ("OpenSpiel-kuhn_poker-v0", "kuhn_poker"),
    "trace": ("Trace-v0", "trace"),
}


def board_of(played: dict[str, dict[str, float]]):
    """A leaderboard where entry E scores ``played[E][label]`` (a normalised score) in 4 episodes of each label."""
    rows, n = [], 0
    for entry, scores in played.items():
        for label, score in scores.items():
            env_id, game = ENVS[label]
            for seed in range(4):
                n += 1
                raw = score * (30.5 - 1.7) + 1.7 if game == "breakout" else 0.0  # human-normalised back to points
                rows.append(replace(ROW, id=n, seed=seed, entry=entry, entry_hash=entry, env_label=label,
                                    env_id=env_id, game=game, score=score, raw_return=raw))  # fmt: skip
    return summarise("s", rows, {})


def ranked_together(board) -> set[frozenset[str]]:
    """Every pair of entries some comparison ranks against each other."""
    pairs = set()
    for comparison in board.comparisons:
        if comparison.ranked:
            names = [s.entry for s in comparison.standings]
            pairs |= {frozenset((a, b)) for a in names for b in names if a != b}
    return pairs


def test_entries_that_played_different_games_are_never_ranked_against_each_other() -> None:
    board = board_of({
        "lm-generate": {"trace": 0.0},  # played Trace only
        "random": {"breakout": 0.05, "ttt": 0.3, "kuhn": 0.4},
        "nanogpt": {"breakout": 0.9},  # one Breakout game
        "mcts": {"ttt": 0.8, "kuhn": 0.6},  # OpenSpiel games
    })  # fmt: skip
    pairs = ranked_together(board)
    assert frozenset(("lm-generate", "random")) not in pairs
    assert frozenset(("nanogpt", "mcts")) not in pairs
    assert frozenset(("nanogpt", "random")) in pairs  # both played breakout: ranked there, on breakout only
    assert frozenset(("mcts", "random")) in pairs
    for comparison in board.comparisons:  # every entry of a comparison played every one of its envs
        for standing in comparison.standings:
            assert all((standing.entry, label, "heldout") in board.cells for label in comparison.labels)
    (trace,) = [c for c in board.comparisons if c.scope == "trace"]
    assert not trace.ranked and [s.entry for s in trace.standings] == ["lm-generate"]
    assert not [c for c in board.comparisons if c.scope == SUITE]  # nobody played every env


def test_a_comparison_scores_each_entry_on_its_envs_only() -> None:
    board = board_of({"wide": {"ttt": 1.0, "kuhn": 0.0}, "narrow": {"ttt": 0.5}})
    by_labels = {c.labels: c for c in board.comparisons}
    both, ttt = by_labels[("ttt", "kuhn")], by_labels[("ttt",)]
    assert [s.entry for s in both.standings] == ["wide"] and not both.ranked
    assert [s.entry for s in ttt.standings] == ["wide", "narrow"]  # wide's kuhn losses are left out here
    wide = ttt.standings[0]
    assert wide.iqm.value == pytest.approx(1.0) and not wide.own and ttt.standings[1].own


def test_a_suite_wide_ranking_only_among_entries_that_played_every_env() -> None:
    board = board_of({
        "a": {"breakout": 0.5, "ttt": 0.5, "trace": 0.5},
        "b": {"breakout": 0.2, "ttt": 0.9, "trace": 0.1},
        "c": {"ttt": 1.0},
    })  # fmt: skip
    (suite,) = [c for c in board.comparisons if c.scope == SUITE]
    assert {s.entry for s in suite.standings} == {"a", "b"} and suite.labels == ("breakout", "ttt", "trace")


def test_the_aggregate_tables_rank_within_a_comparison_only() -> None:
    board = board_of({"lm-generate": {"trace": 0.0}, "random": {"breakout": 0.05, "ttt": 0.3}})
    tables = comparison_tables(board)
    ranks = {row[1]: row[0] for table in tables for row in table.rows}
    assert ranks == {"lm-generate": "–", "random": "–"}  # each alone in its comparisons: no rank at all
    assert not any("aggregates" in t.title.lower() for t in tables)
