"""scripts/value_decodability.py: its held-out fit finds a linear target and nothing in noise, and on a tiny
ppo_lora checkpoint it plays the real game and reports every number, the same again from its saved arrays."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "value_decodability.py"
spec = importlib.util.spec_from_file_location("value_decodability", SCRIPT)
decodability = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decodability)  # type: ignore[union-attr]


def test_the_held_out_fit_finds_a_linear_target_and_nothing_in_noise() -> None:
    draws = np.random.default_rng(0)
    x = draws.normal(size=(40, 8, 6))  # (steps, envs, features)
    linear = x @ np.array([1.0, -2.0, 0.5, 0.0, 0.0, 3.0]) + 0.05 * draws.normal(size=(40, 8))
    ev, alphas = decodability.held_out_ev(x, linear, folds=4)
    assert ev > 0.95 and len(alphas) == 4
    noise, _ = decodability.held_out_ev(x, draws.normal(size=(40, 8)), folds=4)
    assert noise < 0.1
    assert decodability.adam_fit(x, linear, 4, "standardized", steps=400, lr=0.05) > 0.9


def test_the_side_read_finds_a_side_the_state_carries_and_not_one_it_does_not() -> None:
    draws = np.random.default_rng(1)
    hidden = draws.normal(size=(40, 8, 6))
    game = np.zeros((40, 8, 11))
    game[..., 0] = 1.0  # the ball in play everywhere
    game[..., 6] = 30.0 * np.sign(hidden[..., 2] - 0.5 * hidden[..., 4])  # the side is a linear read of the state
    game[5, :, 0] = 0.0  # a row with the ball out of play, and states inside the dead band: not counted
    game[6, :, 6] = 3.0
    read = decodability.held_out_side_accuracy(hidden, game, folds=4)
    assert read["side/accuracy"] > 0.95 and read["side/states"] == 38 * 8
    game[..., 6] = 30.0 * np.sign(draws.normal(size=(40, 8)))  # a side the state says nothing about
    assert decodability.held_out_side_accuracy(hidden, game, folds=4)["side/accuracy"] < 0.65


def test_a_checkpoint_report_and_its_saved_arrays(tmp_path: Path) -> None:
    run = train_tiny_breakout_run(tmp_path)
    checkpoint = max((run / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    args = [str(checkpoint), "--envs", "4", "--steps", "6", "--folds", "2", "--updates", "1"]
    decodability.main([*args, "--save", str(tmp_path / "a.npz"), "--json", str(tmp_path / "a.json")])
    report = json.loads((tmp_path / "a.json").read_text())
    arrays = np.load(tmp_path / "a.npz")
    assert arrays["hidden"].shape == (6, 4, 32) and arrays["target"].shape == arrays["head"].shape == (6, 4)
    assert arrays["game"].shape == (6, 4, 11)
    names = [f"ev/ridge/{n}" for n in ("hidden", "unit", "game")] + [f"ev/adam/{n}" for n in decodability.INPUTS]
    assert all(math.isfinite(report[name]) for name in ["ev/head", *names])
    assert report["side/states"] >= 0 and "side/accuracy" in report
    config = json.loads((run / "config.json").read_text())["config"]
    assert report["adam_steps"] == config["update_epochs"] and report["adam_batch"] == 8  # 2 envs x 4 steps: one step
    decodability.main([*args, "--load", str(tmp_path / "a.npz"), "--json", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text()) == report
