"""``llm-gym play`` as an evaluation tool: a progress bar on a terminal (never under --json or in a pipe), rates that
read right below 1 step/s, wins/draws/losses with intervals for every game with outcomes, and every option checked
before a model loads."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from llm_gym.cli.play_progress import format_rate
from llm_gym.testing import error_line, invoke

PLAY = ["play", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--episodes", "300"]


def run_on_a_terminal(*args: str) -> str:
    """The CLI's stdout and stderr as a terminal 80 columns wide shows them (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "LINES": "24", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    command = [sys.executable, "-c", "from llm_gym.cli import main; main()", *args]
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_progress_bar_on_a_terminal() -> None:
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run_on_a_terminal(*PLAY))  # without colours and cursor moves
    assert re.search(r"play \d+/300 episodes", shown), shown[:2000]
    assert "steps/s" in shown and "ETA" in shown
    assert "mean return" in shown  # and the report after it


def test_no_progress_bar_under_json_even_on_a_terminal() -> None:
    shown = run_on_a_terminal(*PLAY, "--json")
    report = json.loads(shown)  # nothing but the JSON: no bar, no colour codes
    assert len(report["episodes"]) == 300


def test_no_progress_bar_in_a_pipe() -> None:
    result = invoke(*PLAY)
    assert result.exit_code == 0 and "episodes" not in result.stderr and "ETA" not in result.output


def test_wins_draws_and_losses_with_intervals_without_task_ids() -> None:
    report = json.loads(invoke(*PLAY[:-1], "40", "--json").output)
    (game,) = report["per_game"]
    assert game["wins"] + game["draws"] + game["losses"] == game["ended"] == 40
    scores = [e["return"] for e in report["episodes"]]
    assert game["wins"] == scores.count(1) and game["losses"] == scores.count(-1) and game["draws"] == scores.count(0)
    for kind in ("win", "draw", "loss"):
        low, high = game[f"{kind}_share_ci95"]
        assert 0 <= low <= game[f"{kind}_share"] <= high <= 1
    assert {e["outcome"] for e in report["episodes"]} <= {"win", "draw", "loss"}
    table = invoke(*PLAY[:-1], "40").output
    assert re.search(r"tic_tac_toe\s+40\s+\d+% \[\d+-\d+\]\s+\d+% \[\d+-\d+\]\s+\d+% \[\d+-\d+\]", table), table

    cut = json.loads(invoke(*PLAY[:-1], "3", "--max-steps", "2", "--json").output)
    assert cut["per_game"][0]["cut"] == 3 and cut["per_game"][0]["win_share"] is None  # no game ended


def test_rates_below_one_step_per_second_read_right() -> None:
    assert [format_rate(r) for r in (0.3123, 4.213, 57.31, 1204.4)] == ["0.312", "4.21", "57.3", "1,204"]


def test_refusals_come_before_the_model_loads(tmp_path: Path) -> None:
    # The model does not exist: an option checked after loading it would be reported as a missing model instead.
    lm = ["play", "--agent", "lm", "--model", str(tmp_path / "no_model"), "--env", "OpenSpiel-tic_tac_toe-v0"]
    assert "renders no frames" in error_line(invoke(*lm, "--video", str(tmp_path / "x.mp4")))
    assert "takes no argument 'nosuch'" in error_line(invoke(*lm, "--env-arg", "nosuch=1"))
    assert "task id 0 is goofspiel" in error_line(invoke(*lm, "--task-ids", "0-3"))
    assert "--opponent is for OpenSpiel envs" in error_line(
        invoke(
            "play", "--agent", "lm", "--model", str(tmp_path / "no_model"), "--env", "LLMPong-v0", "--opponent", "mcts"
        )  # fmt: skip
    )
    assert "drop --video" in error_line(invoke(*lm, "--exact", "--video", str(tmp_path / "x.mp4")))
    assert "drop --num-envs" in error_line(invoke(*lm, "--exact", "--num-envs", "4"))
    assert "drop --episodes" in error_line(invoke(*lm, "--exact", "--episodes", "10"))
    assert "model directory" in error_line(invoke(*lm))  # and with nothing else wrong, the model is what is missing
