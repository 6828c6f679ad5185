"""scripts/breakout_life_losses.py: each life lost is read at the ball's last step above the paddle row, and a
tiny ppo_lora checkpoint's greedy games on the real ALE give a summary that adds up."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_life_losses.py"
spec = importlib.util.spec_from_file_location("breakout_life_losses", SCRIPT)
life_losses = importlib.util.module_from_spec(spec)
spec.loader.exec_module(life_losses)  # type: ignore[union-attr]


def step(paddle_x: int, ball_x: int | None, ball_y: int | None, lives: int, action: str) -> dict:
    """One logged step as ``play`` writes it (the offset is Breakout.paddle_offset: ball x + 1 - paddle centre)."""
    offset = None if ball_x is None else ball_x + 1 - (paddle_x + 8)
    return {"paddle_x": paddle_x, "ball_y": ball_y, "offset": offset, "lives": lives, "score": 0, "action": action}


def test_a_loss_is_read_above_the_paddle_row() -> None:
    game = [
        step(100, 60, 150, 5, "RIGHT"),
        step(136, 70, 185, 5, "RIGHT"),  # last step above the paddle row (y 189): ball 73 px left of the centre
        step(136, 72, 205, 5, "RIGHT"),  # below the row: not the one to read
        step(136, None, None, 4, "FIRE"),  # the life is gone
        {"lives": 4, "score": 0, "end": True},
    ]
    (loss,) = life_losses.life_losses([game])
    assert loss["offset"] == 70 + 1 - (136 + 8) and loss["paddle_x"] == 136
    assert loss["actions"] == {"RIGHT": 2}  # the steps up to the one read, not after it
    summary = life_losses.summarise("hand-made", [game])
    assert summary["lives_lost"] == 1 and summary["ball_left_of_paddle"] == 1
    assert summary["paddle_against_right_wall"] == 1 and summary["paddle_against_left_wall"] == 0


def test_greedy_games_of_a_checkpoint(tmp_path: Path) -> None:
    run = train_tiny_breakout_run(tmp_path)
    out = tmp_path / "losses.json"
    life_losses.main([str(run), "--games", "2", "--max-steps", "300", "--json", str(out)])
    (result,) = json.loads(out.read_text())["results"]
    assert result["games"] == 2 and len(result["game_scores"]) == 2
    assert result["ball_left_of_paddle"] + result["ball_right_of_paddle"] <= result["lives_lost"] <= 10
    assert 0.0 <= result["share_of_those_against_left_wall"] + result["share_of_those_against_right_wall"] <= 1.0
    assert result["lives_lost"] >= 1  # the tiny policy misses balls within 300 steps: the losses path runs
    assert abs(sum(result["actions_in_last_9_steps"].values()) - 1.0) < 0.02
