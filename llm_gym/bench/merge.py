"""Merging episode stores: benches run on several machines (a GPU box for the LM entries, a laptop for the rest)
each fill their own SQLite file; ``llm-gym bench --merge OTHER.sqlite`` copies the episodes this store lacks.

* Idempotent: episodes are matched by the store's unique key (entry, config hash, env label, env hash, seed, task
  id); an episode this store already holds is kept as it is, so merging twice, or merging overlapping stores,
  adds each episode once.
* Atomic: the whole merge is one transaction; a kill leaves this store as it was before the merge.
* The other file is checked like any store (not SQLite, another program's database, damaged, a newer schema: one
  line, nothing written) and only ever opened read-only.
* Exact evaluations travel the same way: those this store lacks (by their identity, entry and env hashes) are copied
  in the same transaction, one already held is kept as it is; a file without the exact table (older stores) has none
  to give, and this store gets the table only when one is copied.
* One suite: ``bench --suite A --merge B.sqlite`` copies suite A's episodes only (and the entry records they use);
  the episodes of other suites are counted in the report and left where they are, and a file with none of A's is
  refused in one line naming the suites it does hold.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from llm_gym.bench.store import EpisodeStore, merge_machines
from llm_gym.bench.store_file import StoreError, check_existing, ensure_exact_table, has_exact_table


@dataclass(frozen=True)
class MergeReport:
    """What one merge did."""

    source: str
    """The merged file."""
    episodes: int
    """Episodes the other file holds."""
    added: int
    """Of those, episodes this store did not hold (now added)."""
    trajectories: int
    """Trajectories added with them."""
    entries: int
    """Entry identities (config, checkpoint, training) this store did not know."""
    left_out: dict[str, int] = dataclasses.field(default_factory=dict)
    """Episodes of other suites than the one merged, by suite (not copied)."""
    exact: int = 0
    """Exact evaluations this store did not hold (now added)."""


def merge_store(store: EpisodeStore, other: str | Path, suite: str | None = None) -> MergeReport:
    """Copy into ``store`` every episode (with its trajectory) and entry record of ``other`` it lacks; with
    ``suite``, only that suite's episodes and the entry records they use."""
    other = Path(other)
    if not other.is_file():
        raise StoreError(f"{other}: no such results file to merge")
    if other.resolve() == store.path.resolve():
        raise StoreError(f"{other} is the store itself; merge another file into it")
    check_existing(other)
    source = sqlite3.connect(f"file:{other}?mode=ro", uri=True)
    try:
        return _merge(store, source, str(other), suite)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{other}: cannot merge this results file: {exc}") from exc
    finally:
        source.close()


def _merge(store: EpisodeStore, source: sqlite3.Connection, name: str, suite: str | None) -> MergeReport:
    suites = dict(source.execute("SELECT suite, COUNT(*) FROM episodes GROUP BY suite ORDER BY suite").fetchall())
    left_out = {s: n for s, n in suites.items() if suite is not None and s != suite}
    if left_out and suite not in suites:
        held = ", ".join(f"{s} ({n} episodes)" for s, n in left_out.items())
        raise StoreError(f"{name} holds no episode of suite {suite!r} but of {held}; merge it with --suite of those")
    where, arguments = ("WHERE suite=?", (suite,)) if suite is not None else ("", ())
    cursor = source.execute(f"SELECT * FROM episodes {where} ORDER BY id", arguments)
    columns = [d[0] for d in cursor.description]
    copied = [c for c in columns if c != "id"]
    insert = (
        f"INSERT INTO episodes ({', '.join(copied)}) VALUES ({', '.join('?' * len(copied))}) "
        "ON CONFLICT DO NOTHING RETURNING id"
    )
    episodes = added = trajectories = entries = 0
    with store.conn:  # one transaction: all of the other file's new episodes, or none
        for values in cursor:
            episodes += 1
            row = dict(zip(columns, values, strict=True))
            inserted = store.conn.execute(insert, [row[c] for c in copied]).fetchone()
            if inserted is None:
                continue
            added += 1
            blob = source.execute("SELECT data FROM trajectories WHERE episode_id=?", (row["id"],)).fetchone()
            if blob is not None:
                store.conn.execute("INSERT INTO trajectories VALUES (?, ?)", (inserted[0], blob[0]))
                trajectories += 1
        with_exact = has_exact_table(source)
        exact = _merge_exact(store, source, where, arguments) if with_exact else 0
        used, used_arguments = "", ()
        if suite is not None:  # the entry records that the suite's episodes and exact evaluations name
            used, used_arguments = (
                "WHERE (entry, entry_hash) IN (SELECT entry, entry_hash FROM episodes WHERE suite=?)",
                (suite,),
            )
            if with_exact:
                used += " OR (entry, entry_hash) IN (SELECT entry, entry_hash FROM exact WHERE suite=?)"
                used_arguments += (suite,)
        for entry, entry_hash, agent, config, checkpoint, training, machine in source.execute(
            f"SELECT * FROM entries {used}", used_arguments
        ):
            ours = store.conn.execute(
                "SELECT training, machine FROM entries WHERE entry=? AND entry_hash=?", (entry, entry_hash)
            ).fetchone()
            if ours is None:
                store.conn.execute(
                    "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (entry, entry_hash, agent, config, checkpoint, training, machine),
                )
                entries += 1
                continue
            # Known identity: the same config and checkpoint. Keep our training record (fill it in if we had none)
            # and list both machines, since its episodes now come from both.
            machines = merge_machines(json.loads(ours[1]), json.loads(machine))
            store.conn.execute(
                "UPDATE entries SET training=COALESCE(training, ?), machine=? WHERE entry=? AND entry_hash=?",
                (training, json.dumps(machines, sort_keys=True), entry, entry_hash),
            )
    return MergeReport(name, episodes, added, trajectories, entries, left_out, exact)


def _merge_exact(store: EpisodeStore, source: sqlite3.Connection, where: str, arguments: tuple) -> int:
    """Copy the exact evaluations ``source`` holds (of one suite with ``where``) that ``store`` lacks; the count."""
    cursor = source.execute(f"SELECT * FROM exact {where}", arguments)
    columns = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    if not rows:
        return 0
    ensure_exact_table(store.conn)
    insert = f"INSERT INTO exact ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) ON CONFLICT DO NOTHING"
    return sum(store.conn.execute(insert, row).rowcount for row in rows)
