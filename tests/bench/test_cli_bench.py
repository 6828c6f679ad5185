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


def test_leaderboard_md_escapes_what_names_hold(tiny_suite: Path, tmp_path: Path) -> None:
    """Entry, label and game names reach leaderboard.md as text: index.html and the viewer escaped them, the
    markdown kept raw ``<script>`` and ``<svg onload=...>``."""
    hostile = (
        tiny_suite.read_text()
        .replace('name = "random"', 'name = "<script>alert(1)</script>"')
        .replace('label = "breakout"', 'label = "<svg onload=alert(2)>"')
        .replace('envs = ["breakout"]', 'envs = ["<svg onload=alert(2)>"]')
        .replace('game = "tic_tac_toe"', 'game = "<img src=x onerror=alert(3)>[x](javascript:alert(4))"')
    )
    suite = tmp_path / "hostile.toml"
    suite.write_text(hostile)
    out = tmp_path / "board"
    result = _bench("--suite", str(suite), "--out", str(out), "--leaderboard", "--json")
    assert result.exit_code == 0, result.output
    markdown = (out / "leaderboard.md").read_text()
    for raw in ("<script", "<svg", "<img"):
        assert raw not in markdown, raw
    assert "](javascript:" not in markdown.replace("\\]", ""), "a name made a link"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown and "&lt;svg onload=alert(2)&gt;" in markdown


def test_plot_file_names_stay_inside_the_plots_folder() -> None:
    from llm_gym.bench.render import _file_name

    assert _file_name("tiny-ppo") == "tiny-ppo"
    for name in ("../../etc/evil", "a/b", "..", "x\0y"):
        made = _file_name(name)
        assert "/" not in made and not made.startswith(".") and "\0" not in made
    assert _file_name("a/b") != _file_name("a?b")


def test_a_full_disk_or_an_unwritable_store_is_one_line_and_keeps_what_was_there(
    tiny_suite: Path, tmp_path: Path
) -> None:
    """Disk full: the store and the leaderboard ended in OSError tracebacks; ``--db /proc/x/y.sqlite`` too."""
    from small_disk import error_lines, on_small_disk

    line = _one_error_line(_bench("--suite", str(tiny_suite), "--db", "/proc/x/y.sqlite"))
    assert line == "error: cannot write /proc/x/y.sqlite: No such file or directory"
    host = tmp_path / "host.sqlite"  # a store elsewhere, to render from onto the full disk
    assert _bench("--suite", str(tiny_suite), "--db", str(host), "--record-trajectories").exit_code == 0
    done = on_small_disk(tmp_path / "disk", "2m", f"""
        bench() {{ "$LLM_GYM" bench --suite {tiny_suite} "$@"; }}
        bench --db "$DISK/b.sqlite" --entry random --record-trajectories > /dev/null; echo "first=$?"
        bench --db {host} --render-only --out "$DISK/board" > /dev/null && cp "$DISK/board/leaderboard.md" {tmp_path}/md
        fill 2048
        bench --db "$DISK/b.sqlite" --entry scripted --record-trajectories > /dev/null; echo "store=$?"
        bench --db {host} --render-only --out "$DISK/board" > /dev/null; echo "render=$?"
        cmp -s "$DISK/board/leaderboard.md" {tmp_path}/md && echo "leaderboard kept"; ls -a "$DISK/board"
        rm "$DISK/.fill"
        bench --db "$DISK/b.sqlite" --render-only --json --out "$DISK/board2"
    """)  # fmt: skip
    store_line, render_line = error_lines(done.stderr)
    assert (
        "cannot write" in store_line
        and "b.sqlite" in store_line
        and "the episodes stored before are kept" in store_line
    )
    assert "cannot write" in render_line and "the previous leaderboard is kept" in render_line
    assert "first=0" in done.stdout and "store=2" in done.stdout and "render=2" in done.stdout
    assert "leaderboard kept" in done.stdout and ".render-" not in done.stdout, done.stdout
    assert json.loads(done.stdout[done.stdout.index("{") :])["stored_episodes"] == 5  # random's five, whole
