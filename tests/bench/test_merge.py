"""`llm-gym bench --merge`: stores filled on different machines become one, each episode once, trajectories with
them; files that are not our stores are refused in one line and neither file is written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from llm_gym.bench.merge import merge_store
from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite
from llm_gym.cli import build_app


def _bench(*args: str):
    return CliRunner().invoke(build_app(), ["bench", *args])


def _fill(db: Path, suite: Path, entries: list[str], machine: dict | None = None) -> None:
    with EpisodeStore(db) as store:
        run_suite(load_suite(suite).select(entries=entries), store, record=True, progress=False)
        if machine is not None:  # as if benchmarked elsewhere
            store.conn.execute("UPDATE entries SET machine=?", (json.dumps(machine),))
            store.conn.commit()


def _episodes(db: Path) -> dict[tuple, tuple]:
    with EpisodeStore(db) as store:
        return {
            (r.entry, r.entry_hash, r.env_label, r.env_hash, r.seed, r.task_id): (
                r.episode_return,
                r.length,
                json.dumps(store.trajectory(r.id), sort_keys=True),
            )
            for r in store.episodes()
        }


def test_merging_adds_each_missing_episode_once_with_its_trajectory(tiny_suite: Path, tmp_path: Path) -> None:
    here, there = tmp_path / "here.sqlite", tmp_path / "there.sqlite"
    _fill(here, tiny_suite, ["random"])
    _fill(there, tiny_suite, ["random", "scripted"], machine={"processor": "gpu-box", "cpus": 16})
    mine, theirs = _episodes(here), _episodes(there)
    assert set(mine) < set(theirs)  # overlapping: random's episodes are in both
    before = there.read_bytes()

    with EpisodeStore(here) as store:
        report = merge_store(store, there)
        assert (report.episodes, report.added) == (len(theirs), len(theirs) - len(mine))
        assert report.trajectories == report.added and report.entries == 1  # scripted's record is new
        again = merge_store(store, there)
        assert again.added == again.trajectories == again.entries == 0  # idempotent
        info = store.entry_info()
    merged = _episodes(here)
    assert merged == {**theirs, **mine}  # every episode once; the ones already here kept as they were
    assert all(trajectory != "null" for _, _, trajectory in merged.values())
    assert there.read_bytes() == before  # the other file is only read
    machines = {name: v["machine"] for (name, _), v in info.items()}
    assert machines["scripted"] == {"processor": "gpu-box", "cpus": 16}
    # random was benchmarked on both machines: both are named
    assert {m["processor"] for m in machines["random"]["machines"]} >= {"gpu-box"}
    assert len(machines["random"]["machines"]) == 2


def test_foreign_damaged_and_self_merges_are_refused_in_one_line(tiny_suite: Path, tmp_path: Path) -> None:
    db = tmp_path / "mine.sqlite"
    _fill(db, tiny_suite, ["random"])
    foreign = tmp_path / "photos.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE photos (path TEXT)")
    conn.commit()
    conn.close()
    notes = tmp_path / "notes.sqlite"
    notes.write_text("not a database")
    files = {p: p.read_bytes() for p in (db, foreign, notes)}
    for other, message in (
        (foreign, "another program"),
        (notes, "not a SQLite results file"),
        (db, "is the store itself"),
        (tmp_path / "missing.sqlite", "no such results file"),
    ):
        result = _bench("--suite", str(tiny_suite), "--db", str(db), "--merge", str(other))
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0], result.output
    assert {p: p.read_bytes() for p in files} == files


def test_the_cli_merges_then_renders_the_merged_store(tiny_suite: Path, tmp_path: Path) -> None:
    here, there, out = tmp_path / "here.sqlite", tmp_path / "there.sqlite", tmp_path / "board"
    _fill(here, tiny_suite, ["random"])
    _fill(there, tiny_suite, ["scripted"])
    plain = _bench("--suite", str(tiny_suite), "--db", str(here), "--merge", str(there), "--out", str(out))
    assert plain.exit_code == 0 and "merged" in plain.output
    assert not out.exists()  # without --leaderboard a merge renders nothing
    result = _bench(
        "--suite", str(tiny_suite), "--db", str(here), "--merge", str(there), "--leaderboard", "--out", str(out),
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["merged"][0]["added"] == 0 and report["stored_episodes"] == 7 and "played" not in report
    page = (out / "leaderboard.md").read_text()
    assert "| scripted |" in page and "| random |" in page


def test_a_merge_copies_only_the_chosen_suites_episodes_and_says_what_it_left(tiny_suite: Path, tmp_path: Path) -> None:
    """``bench --suite A --merge B.sqlite`` copied another suite's episodes in silently."""
    other_suite = tmp_path / "other.toml"
    other_suite.write_text(tiny_suite.read_text().replace("two cheap envs", "another suite"))
    here, mixed, foreign = tmp_path / "here.sqlite", tmp_path / "mixed.sqlite", tmp_path / "foreign.sqlite"
    _fill(mixed, tiny_suite, ["random"])
    _fill(mixed, other_suite, ["scripted"])
    _fill(foreign, other_suite, ["random"])
    result = _bench("--suite", str(tiny_suite), "--db", str(here), "--merge", str(mixed), "--json")
    assert result.exit_code == 0, result.output
    merged = json.loads(result.stdout)["merged"][0]
    assert merged["left_out"] == {"other": 2} and merged["added"] == merged["episodes"] == 5
    with EpisodeStore(here) as store:
        assert {r.suite for r in store.episodes()} == {"tiny"}
        assert {e for e, *_ in store.conn.execute("SELECT entry FROM entries")} == {"random"}
    plain = _bench("--suite", str(tiny_suite), "--db", str(here), "--merge", str(mixed))
    assert "left out 2 of suite other" in plain.stderr
    refused = _bench("--suite", str(tiny_suite), "--db", str(here), "--merge", str(foreign))
    line = refused.stderr.strip()
    assert refused.exit_code == 2 and line.count("\n") == 0 and "holds no episode of suite 'tiny'" in line
    assert "other (5 episodes)" in line
