"""kill -9 in the middle of a bench run, then the same command again: every episode stored exactly once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench_suites import HELDOUT, RANDOM, SCRIPTED_ON_BREAKOUT, env, suite  # tests/bench_suites.py

from llm_gym.bench.suite import load_suite

SUITE = suite(
    "long enough to be killed in the middle",
    HELDOUT,
    env("breakout", "LLMBreakout-text-v0"),
    env("ttt", "OpenSpiel-tic_tac_toe-v0"),
    RANDOM,
    SCRIPTED_ON_BREAKOUT,
    episodes=24,
    max_steps=150,
    num_envs=3,
)


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0


def _bench(suite: Path, db: Path) -> list[str]:
    return [
        str(Path(sys.executable).parent / "llm-gym"),
        "bench",
        "--suite",
        str(suite),
        "--db",
        str(db),
        "--no-progress",
    ]


def test_sigkill_mid_run_then_rerun_stores_every_episode_once(tmp_path: Path) -> None:
    suite_path = tmp_path / "killme.toml"
    suite_path.write_text(SUITE)
    db = tmp_path / "episodes.sqlite"
    planned = load_suite(suite_path).episodes()
    process = subprocess.Popen(_bench(suite_path, db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _stored(db) < 5 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = _stored(db)
    assert process.returncode == -signal.SIGKILL
    assert 5 <= before < len(planned), "the kill should land mid-run"

    rerun = subprocess.run([*_bench(suite_path, db), "--json"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["already_stored"] == before
    assert report["played"] == len(planned) - before

    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT entry, env_label, seed, task_id FROM episodes").fetchall()
    conn.close()
    assert len(rows) == len(planned)
    assert set(rows) == {(s.entry, s.env_label, s.seed, s.task_id) for s in planned}
