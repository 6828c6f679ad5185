from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from llm_gym.bench.store import EpisodeRow, EpisodeStore, StoreError


def _row(**changes) -> EpisodeRow:
    row = EpisodeRow(
        suite="s", split="heldout", entry="random", entry_hash="e1", agent="random", checkpoint_hash=None,
        env_label="ttt", game="tic_tac_toe", env_id="OpenSpiel-tic_tac_toe-v0", env_args="{}", env_hash="h1",
        task_id=None, seed=7, episode_return=1.0, raw_return=1.0, score=1.0, length=3, truncated=False,
        invalid_actions=0, decisions=3, tokens=None, wall_seconds=0.01, llm_gym_version="0.1.0",
        final_info={"score": 1.0},
    )  # fmt: skip
    return replace(row, **changes)


def test_an_episode_is_stored_once(tmp_path: Path) -> None:
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        assert store.add(_row(), trajectory={"steps": [{"reward": 1.0}]})
        assert not store.add(_row(episode_return=-1.0))  # the same key again: kept as first stored
        assert store.add(_row(seed=8))
        assert store.add(_row(entry_hash="e2"))  # a re-configured entry is a new set of episodes
        assert store.count() == 3
        first = next(store.episodes())
        assert first.episode_return == 1.0 and first.final_info == {"score": 1.0}
        assert store.trajectory(first.id) == {"steps": [{"reward": 1.0}]}
        assert store.keys("random", "e1", "ttt", "h1") == {(7, None), (8, None)}
    with EpisodeStore(tmp_path / "e.sqlite") as store:  # reopened: same rows
        assert store.count() == 3


def test_a_file_that_is_not_sqlite_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    content = b"these are my notes, not a database\n" * 100
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not a SQLite results file"):
        EpisodeStore(path)
    assert path.read_bytes() == content


def test_a_damaged_store_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    with EpisodeStore(path) as store:
        for seed in range(200):
            store.add(_row(seed=seed, final_info={"pad": "x" * 500}))
    data = bytearray(path.read_bytes())
    data[4096 : 4096 * 3] = b"\xff" * (4096 * 2)  # overwrite pages after the header
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged"):
        EpisodeStore(path)
    assert path.read_bytes() == bytes(data)


def test_another_programs_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.execute("INSERT INTO invoices (amount) VALUES (12.5)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        EpisodeStore(path)
    assert path.read_bytes() == before


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    path.touch()
    with EpisodeStore(path) as store:
        assert store.count() == 0
