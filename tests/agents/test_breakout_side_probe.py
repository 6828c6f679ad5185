"""scripts/breakout_side_probe.py on the real game and a tiny ppo_lora checkpoint: the tracker's states fall on the
side of the paddle the game says, and a probe's numbers are probabilities and counts over exactly those states."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_side_probe.py"
spec = importlib.util.spec_from_file_location("breakout_side_probe", SCRIPT)
side_probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(side_probe)  # type: ignore[union-attr]


def test_tracker_states_are_balls_in_play_off_the_paddle_centre() -> None:
    states = side_probe.tracker_states(40, seed=100, min_offset=12.0)
    assert len(states) == 40 and {side for _, _, side in states} == {-1, 1}
    for obs, info, side in states:
        state = info["game_state"]
        offset = state.ball_x + 1 - state.paddle_centre
        assert abs(offset) >= 12.0 and (offset > 0) == (side > 0) and "ball" in obs


def test_probe_of_a_checkpoint(tmp_path: Path) -> None:
    run = train_tiny_breakout_run(tmp_path)
    out = tmp_path / "probe.json"
    side_probe.main([str(run), "--states", "24", "--batch", "8", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["states"] == 24
    (result,) = report["results"]
    assert -1.0 <= result["tracking_margin"] <= 1.0 and 0.0 <= result["top_action_towards_ball"] <= 1.0
    assert result["ball left"]["states"] + result["ball right"]["states"] == 24
    for side in ("ball left", "ball right"):
        assert sum(result[side]["mean_probs"].values()) == pytest.approx(1.0, abs=2e-3)
        assert sum(result[side]["top_action"].values()) == result[side]["states"]
    # The checkpoint's value head was scored on the same states.
    assert math.isfinite(result["value_mean"]) and result["value_std"] >= 0.0
