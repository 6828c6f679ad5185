"""``llm-gym play``'s report on a terminal: the episodes (the first and last of a long run), the mean return with
its interval and the rate, and per game the wins, draws and losses with their 95% Wilson intervals. Every table fits
80 columns; ``--json`` prints the report itself instead."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from llm_gym.cli.play_progress import format_rate


def print_episodes(report: dict[str, Any], console: Any) -> None:
    """The episodes (at most :data:`SHOWN_EPISODES` rows), the mean return with its interval and the rate, and per
    game the wins, draws and losses with their intervals."""
    rows = report["episodes"]
    title = f"{report['agent']} on {report['env_id']}" + (" (sampled)" if report["sampled"] else "")
    with_outcome = any(row.get("outcome") for row in rows)
    table = Table("episode", "seed", "return", "length", *(["outcome"] if with_outcome else []), title=title,
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fmt: skip
    indexes = list(range(len(rows)))
    if len(rows) > SHOWN_EPISODES:
        indexes = indexes[: SHOWN_EPISODES - 2] + [-1] + indexes[-2:]  # -1: the row that says some are left out
    for i in indexes:
        if i < 0:
            table.add_row(f"({len(rows) - SHOWN_EPISODES} more)", "", "", "")
            continue
        row = rows[i]
        cut = " (cut)" if row["truncated"] else ""
        table.add_row(str(i), str(row["seed"]), f"{row['return']:g}", f"{row['length']}{cut}",
                      *([row.get("outcome") or ""] if with_outcome else []))  # fmt: skip
    console.print(table)
    mean, ci = report["mean_return"], report["ci95"]
    console.print(
        f"mean return {mean:.3g} ± {ci:.2g} (95% CI, n={len(rows)}); {report['steps']} steps in "
        f"{report['seconds']:.1f} s, {format_rate(report['steps_per_second'])} steps/s",
        highlight=False,
    )
    if "per_game" in report:
        console.print(game_table(report["per_game"]))


SHOWN_EPISODES = 20
"""Rows of the episode table; a longer run shows its first and last episodes (--json has every one)."""


def game_table(rows: list[dict[str, Any]]) -> Table:
    """Per game: episodes, wins / draws / losses as shares of the games that ended with 95% Wilson intervals (where
    the game has outcomes), and the mean score."""
    outcomes = any(row.get("ended") is not None for row in rows)
    cut = outcomes and any(row["cut"] for row in rows)  # a column only where some game was cut before its end
    columns = [
        "game",
        "n",
        *(["win", "draw", "loss"] if outcomes else ["win rate"]),
        *(["cut"] if cut else []),
        "score",
    ]
    table = Table(
        *columns, title="per game (95% intervals)", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    table.columns[0].overflow = "fold"
    for row in rows:
        if outcomes:
            middle = [_share(row, kind) for kind in ("win", "draw", "loss")] + ([str(row["cut"])] if cut else [])
        else:
            low, high = row["win_rate_ci95"]
            middle = [f"{row['win_rate']:.2f} [{low:.2f}, {high:.2f}]"]
        score = f"{row['mean_score']:.2f}" + (f" ± {row['score_ci95']:.2f}" if row["episodes"] > 1 else "")
        table.add_row(row["game"], str(row["episodes"]), *middle, score)
    return table


def _share(row: dict[str, Any], kind: str) -> str:
    """``45% [30-61]``: a share of the games that ended with its Wilson interval, in percent."""
    share, interval = row[f"{kind}_share"], row[f"{kind}_share_ci95"]
    if share is None:
        return "-"
    return f"{100 * share:.0f}% [{100 * interval[0]:.0f}-{100 * interval[1]:.0f}]"
