"""The leaderboard's exact values (:mod:`llm_gym.bench.exact`): one table per env with stored exact evaluations,
entries in the leaderboard's order, and one ``results.jsonl`` line per stored evaluation.

A table shows, per entry, the evaluation of the identity whose episodes the leaderboard shows (the same entry and
env hashes), so a re-configured entry's old values never stand beside its new episodes. The tables are plain
:class:`Table` data: the markdown and HTML renderers escape every text of them as they escape the others.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from llm_gym.bench.render.tables import Table
from llm_gym.bench.store import ExactRow
from llm_gym.bench.summary import Leaderboard

FAMILY = "exact"
"""The section these tables go in (``SECTIONS`` of :mod:`llm_gym.bench.render.markdown`)."""


def shown_exact(board: Leaderboard, rows: Sequence[ExactRow]) -> dict[str, list[ExactRow]]:
    """``env label -> rows`` in the board's env and entry order: per (entry, env), the row of the identity whose
    episodes the board shows."""
    identity = {
        (r.entry, r.env_label): (r.entry_hash, r.env_hash) for cell in board.cells.values() for r in cell.rows[:1]
    }
    by_key = {
        (r.entry, r.env_label): r for r in rows if identity.get((r.entry, r.env_label)) == (r.entry_hash, r.env_hash)
    }
    out: dict[str, list[ExactRow]] = {}
    for env in board.envs:
        chosen = [by_key[(entry, env.label)] for entry in board.entries if (entry, env.label) in by_key]
        if chosen:
            out[env.label] = chosen
    return out


def exact_tables(board: Leaderboard, rows: Sequence[ExactRow]) -> list[Table]:
    """One table per env with exact values."""
    return [_table(label, shown, board.agents) for label, shown in shown_exact(board, rows).items()]


def _table(label: str, rows: Sequence[ExactRow], agents: Mapping[str, str]) -> Table:
    results = [r.result for r in rows]
    perfect = any(r.get("worst_return") is not None for r in results)
    best = next((r["best_response_return"] for r in results if r.get("best_response_return") is not None), None)
    header = ["entry", "agent", "policy read as", "expected return"]
    if best is not None:
        header.append("share of best response")
    header += ["win", "draw", "loss"]
    if perfect:
        header.append("worst vs adversary")
    if best is not None:
        header.append("exploitability")
    header += ["positions asked", "s"]
    body = []
    for row, result in zip(rows, results, strict=True):
        cells = [row.entry, agents.get(row.entry, ""), "greedy" if result.get("greedy") else "its probabilities",
                 f"{result['expected_return']:.4f}"]  # fmt: skip
        if best is not None:
            cells.append(f"{result['expected_return'] / best:.2f}" if best else "–")
        cells += [_percent(result["win"]), _percent(result["draw"]), _percent(result["loss"])]
        if perfect:
            cells.append(_number(result.get("worst_return"), ".4f"))
        if best is not None:
            cells.append(_number(result.get("exploitability"), ".4f"))
        cells += [f"{result.get('positions', 0):,}", f"{row.seconds:.1f}"]
        body.append(cells)
    env_id = results[0].get("env_id", "")
    note = (
        f"{env_id}: every chance outcome and every move of the uniformly random opponent weighted by its probability, "
        "the learner's seat drawn as the env draws it; no sampling, so no interval. Each entry's policy is asked once "
        "per distinct position: its own action (greedy), or its probabilities where its actions are draws."
    )
    if perfect:
        note += (
            " Worst vs adversary: the return against an opponent that knows the policy and picks, at every turn, the "
            "reply that ends worst for it."
        )
    if best is not None:
        note += (
            f" Share of best response: the expected return over the best response's {best:.4f} against the random "
            "opponent, the most any policy gets there. Exploitability: open_spiel's, of the policy's table over "
            "information states (0 for a Nash equilibrium)."
        )
    return Table(f"{label}: exact values", header, body, FAMILY, note)


def _percent(p: float) -> str:
    return f"{100 * p:.2f}%"


def _number(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def write_exact_lines(handle: TextIO, rows: Sequence[ExactRow]) -> None:
    """One ``results.jsonl`` line per stored exact evaluation, after the episodes' lines: ``"kind": "exact"`` tells
    them apart (an episode's line has no ``kind``)."""
    for row in rows:
        line: dict[str, Any] = {"kind": "exact", **dataclasses.asdict(row)}
        handle.write(json.dumps(line, sort_keys=True, default=str) + "\n")
