"""The episode store: one SQLite file, one row per played episode, safe under ``kill -9``.

* Identity: a unique index on ``(entry, entry_hash, env_label, env_hash, seed, task_id)``. A rerun inserts with
  ``ON CONFLICT DO NOTHING``, so an episode is stored at most once whatever was killed when.
* Each episode is written in its own transaction (WAL journal, ``synchronous=FULL``): a kill loses at most the
  episodes still being played, never half a row.
* Exact evaluations (:mod:`llm_gym.bench.exact`) sit in their own table, one row per (entry, env) identity.

The file itself (its schema, what is refused without being written to) is :mod:`llm_gym.bench.store_file`'s.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.atomic import writing
from llm_gym.bench.store_file import (
    StoreError,
    ensure_exact_table,
    has_exact_table,
    open_store_file,
)

DEFAULT_DB = Path("leaderboard") / "episodes.sqlite"

__all__ = ["DEFAULT_DB", "EpisodeRow", "EpisodeStore", "ExactRow", "StoreError", "machines_of", "merge_machines"]


@dataclass(frozen=True)
class EpisodeRow:
    """One stored episode."""

    suite: str
    split: str
    entry: str
    entry_hash: str
    agent: str
    checkpoint_hash: str | None
    env_label: str
    game: str
    env_id: str
    env_args: str
    """The env's ``gym.make`` arguments as canonical JSON."""
    env_hash: str
    task_id: int | None
    seed: int
    episode_return: float
    raw_return: float | None
    """The game's own reward summed, before shaping and penalties (None where the env does not report it)."""
    score: float | None
    """The game score: Atari points, OpenSpiel's normalised score in [0, 1], Trace partial credit."""
    length: int
    truncated: bool
    invalid_actions: int
    decisions: int | None
    """Policy decisions (one per step for the LM agents)."""
    tokens: int | None
    """Generated tokens where the policy reports them."""
    wall_seconds: float
    llm_gym_version: str
    final_info: Mapping[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True)
class ExactRow:
    """One stored exact evaluation of an entry on an env (``result`` is :meth:`llm_gym.training.exact.ExactResult.as_dict`)."""

    entry: str
    entry_hash: str
    env_label: str
    env_hash: str
    suite: str
    result: Mapping[str, Any]
    seconds: float
    """Wall time of the evaluation."""
    machine: Mapping[str, Any]
    """Where it was computed (:func:`llm_gym.bench.runner.machine_info`)."""
    llm_gym_version: str
    created_at: float = 0.0


class EpisodeStore:
    """An open results file. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = open_store_file(self.path)

    def __enter__(self) -> EpisodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def add(self, row: EpisodeRow, trajectory: Any = None) -> bool:
        """Store one episode (and its trajectory) in one transaction; False when that episode was already stored."""
        values = asdict(row)
        values.pop("id")
        values["final_info"] = json.dumps(values["final_info"], sort_keys=True, default=str)
        values["truncated"] = int(values["truncated"])
        values["created_at"] = time.time()
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with writing(self.path, "the episodes stored before are kept"), self.conn:  # row and trajectory, or neither
            cursor = self.conn.execute(
                f"INSERT INTO episodes ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING RETURNING id", values
            )
            inserted = cursor.fetchone()
            if inserted is None:
                return False
            if trajectory is not None:
                blob = zlib.compress(json.dumps(trajectory, default=str).encode(), 6)
                self.conn.execute("INSERT INTO trajectories VALUES (?, ?)", (inserted[0], blob))
        return True

    def add_entry(
        self,
        entry: str,
        entry_hash: str,
        agent: str,
        config: Mapping[str, Any],
        checkpoint: str | None,
        training: Mapping[str, Any] | None,
        machine: Mapping[str, Any],
    ) -> None:
        """Record what an entry is (config, checkpoint, how it was trained, where it was benchmarked: every machine
        that played episodes of it, see :func:`merge_machines`)."""
        with writing(self.path, "the episodes stored before are kept"), self.conn:
            known = self.conn.execute(
                "SELECT machine FROM entries WHERE entry=? AND entry_hash=?", (entry, entry_hash)
            ).fetchone()
            machines = merge_machines(json.loads(known[0]), dict(machine)) if known else dict(machine)
            self.conn.execute(
                "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET machine=excluded.machine",
                (
                    entry,
                    entry_hash,
                    agent,
                    json.dumps(config, sort_keys=True, default=str),
                    checkpoint,
                    None if training is None else json.dumps(training, default=str),
                    json.dumps(machines, sort_keys=True),
                ),
            )

    def add_exact(self, row: ExactRow) -> bool:
        """Store one exact evaluation in one transaction; False when that identity's evaluation was already stored
        (the first one stays)."""
        values = asdict(row)
        values["result"] = json.dumps(values["result"], sort_keys=True, default=str)
        values["machine"] = json.dumps(values["machine"], sort_keys=True, default=str)
        values["created_at"] = values["created_at"] or time.time()
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with writing(self.path, "the results stored before are kept"), self.conn:
            ensure_exact_table(self.conn)
            cursor = self.conn.execute(f"INSERT INTO exact ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING", values)
            return cursor.rowcount == 1

    def has_exact(self, entry: str, entry_hash: str, env_label: str, env_hash: str) -> bool:
        """Whether the exact evaluation of this (entry, env) identity is stored."""
        if not has_exact_table(self.conn):
            return False
        row = self.conn.execute(
            "SELECT 1 FROM exact WHERE entry=? AND entry_hash=? AND env_label=? AND env_hash=?",
            (entry, entry_hash, env_label, env_hash),
        )
        return row.fetchone() is not None

    def exact_results(self, suite: str | None = None) -> list[ExactRow]:
        """Stored exact evaluations (of one suite), in a stable order: entry, env label, then oldest first."""
        if not has_exact_table(self.conn):
            return []
        where, params = ("WHERE suite=?", (suite,)) if suite is not None else ("", ())
        cursor = self.conn.execute(f"SELECT * FROM exact {where} ORDER BY entry, env_label, created_at", params)
        names = [d[0] for d in cursor.description]
        out = []
        for values in cursor:
            data = dict(zip(names, values, strict=True))
            data["result"], data["machine"] = json.loads(data["result"]), json.loads(data["machine"])
            out.append(ExactRow(**data))
        return out

    def entry_info(self) -> dict[tuple[str, str], dict[str, Any]]:
        """``(entry, entry_hash) -> {agent, config, checkpoint, training, machine}``."""
        out = {}
        for entry, entry_hash, agent, config, checkpoint, training, machine in self.conn.execute(
            "SELECT * FROM entries"
        ):
            out[(entry, entry_hash)] = {
                "agent": agent,
                "config": json.loads(config),
                "checkpoint": checkpoint,
                "training": None if training is None else json.loads(training),
                "machine": json.loads(machine),
            }
        return out

    def keys(self, entry: str, entry_hash: str, env_label: str, env_hash: str) -> set[tuple[int, int | None]]:
        """``(seed, task_id)`` of the episodes already stored for one (entry, env)."""
        rows = self.conn.execute(
            "SELECT seed, task_id FROM episodes WHERE entry=? AND entry_hash=? AND env_label=? AND env_hash=?",
            (entry, entry_hash, env_label, env_hash),
        )
        return {(int(s), None if t is None else int(t)) for s, t in rows}

    def episodes(self, where: str = "", params: Iterable[Any] = ()) -> Iterator[EpisodeRow]:
        """Stored episodes, optionally filtered by an SQL condition."""
        sql = "SELECT * FROM episodes" + (f" WHERE {where}" if where else "") + " ORDER BY id"
        cursor = self.conn.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        for values in cursor:
            data = dict(zip(names, values, strict=True))
            data.pop("created_at")
            data["final_info"] = json.loads(data["final_info"])
            data["truncated"] = bool(data["truncated"])
            yield EpisodeRow(**data)

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])

    def count_entry(self, entry: str, suite: str) -> int:
        """Stored episodes of one entry in one suite (any identity)."""
        row = self.conn.execute("SELECT COUNT(*) FROM episodes WHERE entry=? AND suite=?", (entry, suite))
        return int(row.fetchone()[0])

    def trajectory(self, episode_id: int) -> Any:
        """The recorded trajectory of an episode, or None when it was not recorded."""
        row = self.conn.execute("SELECT data FROM trajectories WHERE episode_id=?", (episode_id,)).fetchone()
        return None if row is None else json.loads(zlib.decompress(row[0]))

    def trajectory_ids(self) -> list[int]:
        return [int(r[0]) for r in self.conn.execute("SELECT episode_id FROM trajectories ORDER BY episode_id")]


def machines_of(machine: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The machines an ``entries.machine`` value names: one machine's description, or ``{"machines": [...]}``."""
    if "machines" in machine:
        return [dict(m) for m in machine["machines"]]
    return [dict(machine)] if machine else []


def merge_machines(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """One ``entries.machine`` value naming every distinct machine of both (one machine stays a plain description,
    as older stores hold it)."""
    merged: list[dict[str, Any]] = []
    for machine in [*machines_of(ours), *machines_of(theirs)]:
        if machine not in merged:
            merged.append(machine)
    return merged[0] if len(merged) == 1 else {"machines": merged}
