"""scripts/breakout_opening_rewards.py on the real game: every window counts each game's steps once, on the training
env, and its rewards are the env's shaping (none with the shaping off: no brick falls in a serve's first steps)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_opening_rewards.py"
spec = importlib.util.spec_from_file_location("breakout_opening_rewards", SCRIPT)
opening = importlib.util.module_from_spec(spec)
spec.loader.exec_module(opening)  # type: ignore[union-attr]


def test_each_window_counts_every_step_once(tmp_path: Path) -> None:
    out = tmp_path / "opening.json"
    opening.main(["--games", "3", "--steps", "5", "--later", "20", "--spread", "40", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["env"]["fire_on_reset"] and report["env"]["terminal_on_life_loss"]
    for name in ("opening", "after_noops", "after_random", "later"):
        assert sum(v["draws"] for v in report[name].values()) == 15
        assert set(report[name]) <= {"NOOP", "FIRE", "RIGHT", "LEFT"}


def test_with_shaping_off_the_opening_pays_nothing() -> None:
    from llm_gym.agent import EnvConfig
    from llm_gym.training import training_env

    env = training_env(EnvConfig(opening.ENV_ID, {"reward_shaping": 0.0}))
    window = opening.window(env, games=2, steps=8, lead="none", lead_steps=0, seed=0)
    assert all(v["mean_reward"] == 0.0 for v in window.values())  # no brick is hit in a serve's first 8 steps
