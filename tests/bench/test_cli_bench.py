"""`llm-gym bench` as a user meets it: one-line errors with suggestions, a refused foreign store left untouched."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from llm_gym.cli import build_app

runner = CliRunner()


def _bench(*args: str):
    return runner.invoke(build_app(), ["bench", *args])


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_unknown_suite_entry_and_env_suggest_close_names(tiny_suite: Path, tmp_path: Path) -> None:
    assert "did you mean 'smoke'" in _one_error_line(_bench("--suite", "smoek"))
    line = _one_error_line(_bench("--suite", str(tiny_suite), "--entry", "scripte", "--db", str(tmp_path / "e.sqlite")))
    assert "unknown entry 'scripte'; did you mean 'scripted'" in line
    line = _one_error_line(_bench("--suite", str(tiny_suite), "--env", "breakuot", "--db", str(tmp_path / "e.sqlite")))
    assert "did you mean 'breakout'" in line


def test_a_foreign_database_is_refused_and_never_overwritten(tiny_suite: Path, tmp_path: Path) -> None:
    db = tmp_path / "mine.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE photos (path TEXT)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    line = _one_error_line(_bench("--suite", str(tiny_suite), "--db", str(db)))
    assert "another program" in line and "left untouched" in line
    assert db.read_bytes() == before
    garbage = tmp_path / "notes.sqlite"
    garbage.write_text("not a database")
    assert "not a SQLite results file" in _one_error_line(_bench("--suite", str(tiny_suite), "--db", str(garbage)))
    assert garbage.read_text() == "not a database"


def test_bench_runs_and_renders_from_the_store(tiny_suite: Path, tmp_path: Path) -> None:
    out = tmp_path / "board"
    result = _bench("--suite", str(tiny_suite), "--entry", "random", "--out", str(out), "--leaderboard", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["played"] == report["planned"] == 5 and report["stored_episodes"] == 5
    markdown = (out / "leaderboard.md").read_text()
    assert "| random |" in markdown and "tic_tac_toe" in markdown
    again = _bench("--suite", str(tiny_suite), "--entry", "random", "--out", str(out), "--render-only", "--json")
    assert again.exit_code == 0 and json.loads(again.output)["stored_episodes"] == 5
