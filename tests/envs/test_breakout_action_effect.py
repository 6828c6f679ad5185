"""scripts/breakout_action_effect.py on the real emulator: branches from one snapshot see the same random numbers (the
report repeats exactly), one decision's two ways of following agree at k=1, and the shaping favours the move towards
the ball."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_action_effect.py"
spec = importlib.util.spec_from_file_location("breakout_action_effect", SCRIPT)
action_effect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(action_effect)  # type: ignore[union-attr]


def test_the_report_repeats_and_the_shaping_favours_moving_towards_the_ball() -> None:
    report = action_effect.measure(states=40, seed=3, shaping=10.0, horizons=(1, 2), gamma=0.99)
    assert report == action_effect.measure(states=40, seed=3, shaping=10.0, horizons=(1, 2), gamma=0.99)
    assert report["states"] == 40 and report["actions"] == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    assert report["hold k=1"] == report["then_random k=1"]  # one decision: nothing follows it yet
    assert report["gae_lambda=0.0"] == report["hold k=1"]  # lambda 0 with a constant critic: the reward itself
    for follow in action_effect.FOLLOWS:
        for k in (1, 2):
            row = report[f"{follow} k={k}"]
            assert 0.0 <= row["direction_share"] <= 1.0 and 0.0 <= row["action_share"] <= 1.0
    held = report["hold k=2"]
    assert held["towards_mean"] > held["noop_mean"] > held["away_mean"]
    assert held["direction_share"] > 0.1


def test_a_branch_from_a_snapshot_replays_the_same_random_numbers() -> None:
    """Sticky actions draw from the emulator's RNG every frame: a branch's first steps must not depend on how long
    it goes on, or the horizons' prefix sums would not be the shorter branches' returns."""
    env = gym.make("LLMBreakout-text-v0", reward_shaping=10.0, fire_on_reset=True, terminal_on_life_loss=True)
    base = env.unwrapped
    base.reset(seed=5)
    for _ in range(7):
        base.step(3)
    snapshot = base.clone_state()
    long = action_effect.branch_rewards(base, snapshot, [2] * 12)
    assert list(action_effect.branch_rewards(base, snapshot, [2] * 4)) == list(long[:4])
    assert list(action_effect.branch_rewards(base, snapshot, [2] * 12)) == list(long)
    assert any(long)  # the shaping pays something on these steps
    env.close()


def test_bad_arguments_get_one_line_that_says_what_to_give(capsys) -> None:  # noqa: ANN001  (pytest fixture)
    for argv, says in ((["--horizons", "1,x"], "whole numbers"), (["--states", "1"], "at least 2")):
        with pytest.raises(SystemExit) as stop:
            action_effect.main(argv)
        assert stop.value.code == 2
        assert says in capsys.readouterr().err
