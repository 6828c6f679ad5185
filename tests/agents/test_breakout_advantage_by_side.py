"""scripts/breakout_advantage_by_side.py: it finds a direction that the rewards favour, finds none in noise, and on a
tiny ppo_lora checkpoint it plays the real game and gives the same report again from its saved arrays."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
from ppo_lora_runs import train_tiny_breakout_run  # tests/agents/ppo_lora_runs.py

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_advantage_by_side.py"
spec = importlib.util.spec_from_file_location("breakout_advantage_by_side", SCRIPT)
by_side = importlib.util.module_from_spec(spec)
spec.loader.exec_module(by_side)  # type: ignore[union-attr]


def _data(towards_reward: float, seed: int = 0) -> dict[str, np.ndarray]:
    """60 decisions of 8 envs, LEFT or RIGHT at random with the ball 30 px to a random side; a move towards the
    ball is rewarded ``towards_reward`` more, on top of noise; a flat value, no episode ends."""
    draws = np.random.default_rng(seed)
    names = draws.choice(["LEFT", "RIGHT"], size=(61, 8))
    sides = 30.0 * draws.choice([-1.0, 1.0], size=(61, 8))
    towards = ((names == "LEFT") & (sides < 0)) | ((names == "RIGHT") & (sides > 0))
    rewards = towards * towards_reward + 0.05 * draws.normal(size=(61, 8))
    return {"values": np.zeros((61, 8)), "rewards": rewards, "ended": np.zeros((61, 8)), "sides": sides,
            "names": names, "gamma": np.array(0.99), "gae_lambda": np.array(0.95)}  # fmt: skip


def test_it_finds_the_direction_the_rewards_favour_and_none_in_noise() -> None:
    strong = by_side.by_direction(_data(0.2), gae_lambda=0.0)
    assert strong["towards"]["advantage_mean"] > 0.5 > -0.5 > strong["away"]["advantage_mean"]
    assert strong["direction_share_of_variance"] > 0.5
    assert strong["towards"]["n"] + strong["away"]["n"] == 60 * 8 and strong["noop_or_fire"]["n"] == 0
    noise = by_side.by_direction(_data(0.0), gae_lambda=0.0)
    assert noise["direction_share_of_variance"] < 0.02
    # A long lambda mixes in later rewards, which here are the other moves' noise: the direction explains less.
    assert by_side.by_direction(_data(0.2), 0.95)["direction_share_of_variance"] < strong["direction_share_of_variance"]


def test_a_noisy_critic_drowns_the_direction_and_the_constant_critic_report_removes_it() -> None:
    noisy = _data(0.2)
    noisy["values"] = np.random.default_rng(1).normal(size=noisy["values"].shape)  # errors 5x the reward's effect
    drowned = by_side.by_direction(noisy, gae_lambda=0.0)["direction_share_of_variance"]
    flat = by_side.with_constant_critic(noisy)
    assert np.ptp(flat["values"]) == 0.0
    assert drowned < 0.1 < 0.5 < by_side.by_direction(flat, gae_lambda=0.0)["direction_share_of_variance"]


def test_a_critic_below_the_returns_puts_the_gradient_on_the_decisions_before_a_lost_ball() -> None:
    """Every 20th step of each env ends an episode; a critic at -3 makes each end's advantage about +3, the last
    few decisions then carry most of the sum of squares, and with the critic at 0 they do not."""
    data = _data(0.2)
    data["ended"][19::20] = 1.0
    low = {**data, "values": np.full_like(data["values"], -3.0)}
    at_end = by_side.by_direction(low, gae_lambda=0.5)["before_an_end"]
    assert at_end["n"] == 3 * 3 * 8 and abs(at_end["share_of_decisions"] - 72 / 480) < 1e-9
    assert at_end["advantage_mean"] > 1.0 and at_end["share_of_sum_of_squares"] > 0.5
    zero = by_side.by_direction(by_side.with_constant_critic(low, 0.0), gae_lambda=0.5)
    assert zero["before_an_end"]["share_of_sum_of_squares"] < 0.3
    assert zero["direction_share_of_variance"] > 0.5 > by_side.by_direction(low, 0.5)["direction_share_of_variance"]


def test_a_checkpoint_report_and_its_saved_arrays(tmp_path: Path) -> None:
    run = train_tiny_breakout_run(tmp_path)
    checkpoint = max((run / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    args = [str(checkpoint), "--envs", "3", "--steps", "5", "--lambdas", "run,0.5"]
    by_side.main([*args, "--save", str(tmp_path / "a.npz"), "--json", str(tmp_path / "a.json")])
    report = json.loads((tmp_path / "a.json").read_text())
    arrays = np.load(tmp_path / "a.npz")
    assert arrays["values"].shape == arrays["sides"].shape == arrays["names"].shape == (6, 3)
    assert set(np.unique(arrays["names"])) <= {"NOOP", "FIRE", "RIGHT", "LEFT"}
    assert {
        "gae_lambda=0.95",
        "gae_lambda=0.5",
        "gae_lambda=0.5, constant critic",
        "gae_lambda=0.5, critic at zero",
    } <= set(report)
    end = report["gae_lambda=0.5"]["before_an_end"]  # of the 5 x 3 decisions, those in an episode's last 3 steps
    assert end["n"] == round(end["share_of_decisions"] * 5 * 3) and 0.0 <= end["share_of_sum_of_squares"] <= 1.0
    by_side.main([*args, "--load", str(tmp_path / "a.npz"), "--json", str(tmp_path / "b.json")])
    assert json.loads((tmp_path / "b.json").read_text()) == report
