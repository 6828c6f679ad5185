"""From stored episodes to the numbers the leaderboard shows (render-agnostic).

For each (entry, env label) the newest identity in the store counts (the latest entry and env hashes), so a
re-configured entry replaces its old episodes in the leaderboard instead of mixing with them.

Per-episode *normalised score* (the unit the aggregate is taken over): Atari = human-normalised raw return
(:mod:`llm_gym.bench.references`), OpenSpiel = the env's normalised score in [0, 1] (1 win, 0.5 draw, 0 loss in
two-player zero-sum games), Trace = partial credit in [0, 1].
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_gym.bench.comparisons import Comparison, compare
from llm_gym.bench.references import ATARI_REFERENCES, atari_game
from llm_gym.bench.stats import Estimate, bootstrap_mean, stratified_bootstrap_iqm, wilson
from llm_gym.bench.store import EpisodeRow
from llm_gym.bench.suite import HELDOUT, TRAIN


def family_of(env_id: str) -> str:
    if env_id.startswith("LLM"):
        return "atari"
    if env_id.startswith("OpenSpiel"):
        return "openspiel"
    if env_id.startswith("Trace"):
        return "trace"
    return "other"


def normalised(row: EpisodeRow) -> float | None:
    """The episode's score on the common scale of the aggregate (None where the game has no reference)."""
    family = family_of(row.env_id)
    if family == "atari":
        game = atari_game(row.env_id)
        raw = row.raw_return if row.raw_return is not None else row.episode_return
        return ATARI_REFERENCES[game].normalise(raw) if game else None
    if family in ("openspiel", "trace"):
        return row.score
    return None


def rung_of(env_args: Mapping[str, Any]) -> str:
    """The opponent ladder rung of an OpenSpiel env: ``random``, ``mcts-<simulations>``."""
    opponent = env_args.get("opponent", "random")
    if opponent == "mcts":
        simulations = (env_args.get("mcts") or {}).get("simulations")
        return f"mcts-{simulations}" if simulations else "mcts"
    return str(opponent)


@dataclass
class Cell:
    """One entry on one env label in one split."""

    rows: list[EpisodeRow]
    returns: Estimate
    raw_returns: Estimate
    scores: Estimate
    normalised: Estimate
    win_rate: Estimate
    wins: int
    draws: int
    losses: int
    exact: Estimate
    mean_length: float
    invalid_per_episode: float
    seconds_per_episode: float
    by_level: dict[int, tuple[Estimate, Estimate]] = field(default_factory=dict)
    """Trace: level -> (exact-match rate, partial credit)."""


def make_cell(rows: Sequence[EpisodeRow]) -> Cell:
    scores = [r.score for r in rows if r.score is not None]
    norm = [v for r in rows if (v := normalised(r)) is not None]
    wins = sum(1 for s in scores if s > 0.5)
    draws = sum(1 for s in scores if s == 0.5)
    exact = [bool(r.final_info.get("exact")) for r in rows]
    levels: dict[int, list[EpisodeRow]] = defaultdict(list)
    for r in rows:
        if "level" in r.final_info:
            levels[int(r.final_info["level"])].append(r)
    n = len(rows)
    return Cell(
        rows=list(rows),
        returns=bootstrap_mean([r.episode_return for r in rows]),
        raw_returns=bootstrap_mean([r.raw_return for r in rows if r.raw_return is not None]),
        scores=bootstrap_mean(scores),
        normalised=bootstrap_mean(norm),
        win_rate=wilson(wins, len(scores)),
        wins=wins,
        draws=draws,
        losses=len(scores) - wins - draws,
        exact=wilson(sum(exact), n),
        mean_length=sum(r.length for r in rows) / max(n, 1),
        invalid_per_episode=sum(r.invalid_actions for r in rows) / max(n, 1),
        seconds_per_episode=sum(r.wall_seconds for r in rows) / max(n, 1),
        by_level={
            level: (
                wilson(sum(bool(r.final_info.get("exact")) for r in group), len(group)),
                bootstrap_mean([r.score for r in group if r.score is not None]),
            )
            for level, group in sorted(levels.items())
        },
    )


@dataclass(frozen=True)
class EnvInfo:
    label: str
    env_id: str
    game: str
    family: str
    args: Mapping[str, Any]
    rung: str


@dataclass
class Aggregate:
    entry: str
    iqm: Estimate
    games: int
    mean_normalised_by_split: dict[str, float]


@dataclass
class Leaderboard:
    """Everything a renderer needs."""

    suite: str
    envs: list[EnvInfo]
    entries: list[str]
    agents: dict[str, str]
    cells: dict[tuple[str, str, str], Cell]
    """(entry, env label, split) -> cell."""
    aggregates: list[Aggregate]
    """Per entry, over every held-out game it played, in the suite's entry order: not a ranking (entries that
    played different games do not compare); :attr:`comparisons` ranks."""
    comparisons: list[Comparison]
    """Entries ranked against each other only on the envs all of them played (:mod:`llm_gym.bench.comparisons`)."""
    entry_info: dict[str, dict[str, Any]]
    """entry -> {config, checkpoint, training, machine} of the identity shown."""
    zero_shot_gain: dict[str, float]
    """Trained entry -> mean normalised score minus its base model's zero-shot entry's, on shared envs (held-out)."""
    trajectories: list[tuple[int, str, str, int]]
    """(episode id, entry, env label, seed) of recorded episodes shown in the viewer."""
    episodes: int

    def ranked(self, label: str, key: str = "normalised", split: str = HELDOUT) -> list[tuple[str, Cell]]:
        """Entries that played ``label``, best lower bound of ``key`` first."""
        present = [(e, self.cells[(e, label, split)]) for e in self.entries if (e, label, split) in self.cells]
        return sorted(present, key=lambda item: _lower(getattr(item[1], key)), reverse=True)


def _lower(estimate: Estimate) -> float:
    if estimate.n == 0:
        return float("-inf")
    return estimate.value if estimate.low != estimate.low else estimate.low  # nan CI: rank by the value


def newest_identity(rows: Iterable[EpisodeRow]) -> list[EpisodeRow]:
    """Rows of the newest (entry hash, env hash) per (entry, env label)."""
    rows = list(rows)
    newest: dict[tuple[str, str], tuple[int, str, str]] = {}
    for r in rows:
        key = (r.entry, r.env_label)
        if key not in newest or (r.id or 0) > newest[key][0]:
            newest[key] = (r.id or 0, r.entry_hash, r.env_hash)
    return [r for r in rows if newest[(r.entry, r.env_label)][1:] == (r.entry_hash, r.env_hash)]


def summarise(
    suite: str,
    rows: Iterable[EpisodeRow],
    entry_info: Mapping[tuple[str, str], dict[str, Any]],
    trajectory_ids: Iterable[int] = (),
) -> Leaderboard:
    rows = newest_identity(r for r in rows if r.suite == suite)
    envs: dict[str, EnvInfo] = {}
    entries: list[str] = []
    agents: dict[str, str] = {}
    hashes: dict[str, str] = {}
    groups: dict[tuple[str, str, str], list[EpisodeRow]] = defaultdict(list)
    for r in rows:
        if r.env_label not in envs:
            args = json.loads(r.env_args)
            envs[r.env_label] = EnvInfo(r.env_label, r.env_id, r.game, family_of(r.env_id), args, rung_of(args))
        if r.entry not in agents:
            entries.append(r.entry)
            agents[r.entry], hashes[r.entry] = r.agent, r.entry_hash
        groups[(r.entry, r.env_label, r.split)].append(r)
    cells = {key: make_cell(group) for key, group in groups.items()}
    aggregates = []
    for entry in entries:
        per_game: dict[str, list[float]] = defaultdict(list)
        by_split: dict[str, list[float]] = defaultdict(list)
        for (e, label, split), cell in cells.items():
            if e != entry:
                continue
            values = [v for r in cell.rows if (v := normalised(r)) is not None]
            by_split[split].extend(values)
            if split == HELDOUT:
                per_game[envs[label].game].extend(values)
        aggregates.append(
            Aggregate(
                entry,
                stratified_bootstrap_iqm(list(per_game.values())),
                len(per_game),
                {s: sum(v) / len(v) for s, v in by_split.items() if v},
            )
        )
    labels_by_family: dict[str, list[str]] = defaultdict(list)
    for label, env in envs.items():
        labels_by_family[env.family].append(label)
    heldout = {(e, label): cell.rows for (e, label, split), cell in cells.items() if split == HELDOUT}
    game_of = {label: env.game for label, env in envs.items()}
    info = {e: dict(entry_info.get((e, hashes[e]), {})) for e in entries}
    wanted = set(trajectory_ids)
    shown: dict[tuple[str, str], tuple[int, str, str, int]] = {}
    for r in rows:  # the viewer shows the first recorded episode of each (entry, env)
        if r.id in wanted and (r.entry, r.env_label) not in shown:
            shown[(r.entry, r.env_label)] = (int(r.id), r.entry, r.env_label, r.seed)
    return Leaderboard(
        suite=suite,
        envs=list(envs.values()),
        entries=entries,
        agents=agents,
        cells=cells,
        aggregates=aggregates,
        comparisons=compare(labels_by_family, game_of, heldout, entries, normalised),
        entry_info=info,
        zero_shot_gain=_zero_shot_gain(entries, info, cells, envs),
        trajectories=sorted(shown.values()),
        episodes=len(rows),
    )


def _zero_shot_gain(
    entries: Sequence[str],
    info: Mapping[str, Mapping[str, Any]],
    cells: Mapping[tuple[str, str, str], Cell],
    envs: Mapping[str, EnvInfo],
) -> dict[str, float]:
    """For each trained entry with a ``model``, the mean gain in normalised score over the zero-shot ``lm`` entries
    of the same model, env by env on the held-out envs both played (a suite may hold several zero-shot entries of
    one model, e.g. score mode for games and generate mode for Trace: each env compares with the one that played
    it)."""
    zero_shot: dict[Any, list[str]] = defaultdict(list)
    for e in entries:
        if info[e].get("agent") == "lm" and not info[e].get("checkpoint"):
            zero_shot[(info[e].get("config") or {}).get("model")].append(e)
    gains = {}
    for entry in entries:
        if not info[entry].get("checkpoint"):
            continue
        bases = zero_shot.get((info[entry].get("config") or {}).get("model"), [])
        diffs = []
        for label in envs:
            if (entry, label, HELDOUT) not in cells:
                continue
            base = next((b for b in bases if (b, label, HELDOUT) in cells), None)
            if base is not None:
                diffs.append(
                    cells[(entry, label, HELDOUT)].normalised.value - cells[(base, label, HELDOUT)].normalised.value
                )
        diffs = [d for d in diffs if d == d]
        if diffs:
            gains[entry] = sum(diffs) / len(diffs)
    return gains


SPLITS = (HELDOUT, TRAIN)
