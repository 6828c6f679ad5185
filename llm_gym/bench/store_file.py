"""The results file itself: its schema, how it is opened, and what is refused without being written to.

* The file is marked as ours with SQLite's ``application_id`` header field. A file that is not SQLite, or a SQLite
  database of something else, is refused with a clear error and never written to.
* Exact evaluations sit in their own table, made with ``CREATE TABLE IF NOT EXISTS`` when the first one is stored,
  so schema 1 stays schema 1: a store written before the table existed opens and renders as it did (reading it
  writes nothing), and an older llm-gym opens a store that has the table and leaves the table alone.

What is read and written through an open file is :class:`llm_gym.bench.store.EpisodeStore`'s.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from llm_gym.atomic import WriteError, error_for, writing
from llm_gym.errors import LLMGymError

APPLICATION_ID = 0x4C4C4D47  # "LLMG": SQLite's application_id header field, set once when we create the file
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE episodes (
    id INTEGER PRIMARY KEY,
    suite TEXT NOT NULL,
    split TEXT NOT NULL,
    entry TEXT NOT NULL,
    entry_hash TEXT NOT NULL,
    agent TEXT NOT NULL,
    checkpoint_hash TEXT,
    env_label TEXT NOT NULL,
    game TEXT NOT NULL,
    env_id TEXT NOT NULL,
    env_args TEXT NOT NULL,
    env_hash TEXT NOT NULL,
    task_id INTEGER,
    seed INTEGER NOT NULL,
    episode_return REAL NOT NULL,
    raw_return REAL,
    score REAL,
    length INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    invalid_actions INTEGER NOT NULL,
    decisions INTEGER,
    tokens INTEGER,
    wall_seconds REAL NOT NULL,
    llm_gym_version TEXT NOT NULL,
    final_info TEXT NOT NULL,
    created_at REAL NOT NULL
);
-- The episode's identity. SQLite treats NULLs as distinct in UNIQUE, so "no task id" is keyed as -1.
CREATE UNIQUE INDEX episode_key ON episodes (entry, entry_hash, env_label, env_hash, seed, IFNULL(task_id, -1));
CREATE TABLE trajectories (
    episode_id INTEGER PRIMARY KEY REFERENCES episodes(id),
    data BLOB NOT NULL
);
CREATE TABLE entries (
    entry TEXT NOT NULL,
    entry_hash TEXT NOT NULL,
    agent TEXT NOT NULL,
    config TEXT NOT NULL,
    checkpoint TEXT,
    training TEXT,
    machine TEXT NOT NULL,
    PRIMARY KEY (entry, entry_hash)
);
"""


_EXACT_SCHEMA = """
CREATE TABLE IF NOT EXISTS exact (
    entry TEXT NOT NULL,
    entry_hash TEXT NOT NULL,
    env_label TEXT NOT NULL,
    env_hash TEXT NOT NULL,
    suite TEXT NOT NULL,
    result TEXT NOT NULL,
    seconds REAL NOT NULL,
    machine TEXT NOT NULL,
    llm_gym_version TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (entry, entry_hash, env_label, env_hash)
)
"""
"""One exact evaluation per (entry, env) identity, the same identity as its episodes'."""


class StoreError(LLMGymError):
    """A results file that cannot be used (not SQLite, another program's database, a newer schema)."""


def has_exact_table(conn: sqlite3.Connection) -> bool:
    """Whether a store holds the exact table (stores that never stored an exact evaluation do not)."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='exact'").fetchone()
    return found is not None


def ensure_exact_table(conn: sqlite3.Connection) -> None:
    """Make the exact table where it is missing (inside the caller's transaction)."""
    conn.execute(_EXACT_SCHEMA)


def open_store_file(path: Path) -> sqlite3.Connection:
    """Open (or create) the store, refusing any file that is not one of ours without writing to it. A store that
    cannot be created (an unwritable folder, a full disk) is one line, and leaves no half-made file behind."""
    fresh = not path.exists() or path.stat().st_size == 0
    if not fresh:
        check_existing(path)
    made_folder = not path.parent.exists()
    try:
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    except WriteError:
        if made_folder:
            shutil.rmtree(path.parent, ignore_errors=True)
        raise
    conn.isolation_level = "DEFERRED"
    try:
        with writing(path):
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            if fresh:
                with conn:
                    conn.executescript(
                        f"BEGIN; {_SCHEMA} PRAGMA application_id={APPLICATION_ID}; "
                        f"PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
                    )
    except WriteError:
        conn.close()
        if fresh:  # what this call made: the file and SQLite's journal files beside it
            for made in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                made.unlink(missing_ok=True)
        raise
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(f"{path}: cannot use this results file: {exc}") from exc
    return conn


def check_existing(path: Path) -> None:
    """Read-only checks of an existing file: SQLite, our application id, a schema version we know."""
    header = path.read_bytes()[:16] if path.is_file() else b""
    if not path.is_file() or not header.startswith(b"SQLite format 3\x00"):
        raise StoreError(
            f"{path} is not a SQLite results file (left untouched); pass another --db or move the file away"
        )
    try:
        probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            app_id = probe.execute("PRAGMA application_id").fetchone()[0]
            version = probe.execute("PRAGMA user_version").fetchone()[0]
            check = probe.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        if "disk I/O error" in str(exc) or "disk is full" in str(exc):  # even reading a WAL store writes beside it
            raise error_for(path, exc, "the episodes stored before are kept") from exc
        raise StoreError(f"{path} is a damaged SQLite file (left untouched): {exc}; pass another --db") from exc
    if check != "ok":
        raise StoreError(f"{path} is a damaged SQLite file (left untouched): {check}; pass another --db")
    if app_id != APPLICATION_ID:
        raise StoreError(
            f"{path} is a SQLite database of another program (application_id {app_id:#x}), not an llm-gym results "
            "file; it was left untouched; pass another --db"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer llm-gym (schema {version}); upgrade llm-gym to read it")
