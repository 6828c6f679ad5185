"""The Breakout feature probe: its observations agree with the game, its regression scores what it should, and it
runs end to end on a saved (tiny) network."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic
from llm_gym.agents.nanogpt_ppo.policy import env_for, network_shape, save_network
from llm_gym.agents.nanogpt_ppo.probe import ENV_ID, collect, main, ridge_r2
from llm_gym.agents.nanogpt_ppo.testing import TINY_SETTINGS
from llm_gym.config import to_dict
from llm_gym.envs.atari.breakout import PADDLE_WIDTH
from llm_gym.runs import Run


def test_the_probe_games_keep_the_ball_in_play_and_put_the_paddle_on_both_sides_of_it() -> None:
    data = collect(200, {"rows": 12, "cols": 20}, num_envs=2)
    assert len(data.texts) == 200 and set(data.env_index) == {0, 1}
    # Every kept grid shows the ball (below the header line, whose "score" has an o of its own).
    assert all("o" in text.split("\n", 1)[1] for text in data.texts)
    offset = data.ball_x - data.paddle_centre
    assert (offset > PADDLE_WIDTH).any() and (offset < -PADDLE_WIDTH).any()
    assert {"LEFT", "RIGHT"} <= set(data.action_names)


def test_ridge_r2_is_one_for_a_linear_target_and_about_zero_for_noise() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 8))
    train = np.arange(400) < 300
    assert ridge_r2(x, x @ rng.normal(size=8) + 3.0, train) == pytest.approx(1.0, abs=1e-3)
    assert ridge_r2(x, rng.normal(size=400), train) < 0.1


def test_the_probe_runs_on_a_saved_network_and_an_untrained_one(tmp_path: Path, capsys) -> None:
    config = NanoGPTPPOConfig(**TINY_SETTINGS)
    env = env_for(config, EnvConfig(ENV_ID))
    torch.manual_seed(0)
    model = NanoGPTActorCritic(network_shape(config, env))
    run = Run.create(ENV_ID, "nanogpt_ppo", to_dict(config), path=tmp_path / "run")
    with run.checkpoint(1) as directory:
        save_network(model, directory)
    run.close()
    checkpoint = run.checkpoints_dir / "step_1"

    out = tmp_path / "probe.json"
    assert main([str(checkpoint), "--steps", "160", "--random-init", "0", "--json", str(out)]) == 0
    first, second = json.loads(out.read_text())
    assert first["network"] == "random init 0" and second["network"].endswith("step_1")
    # The same seed and shape: the saved network is the untrained one, and scores the same.
    assert first["ball_r2"] == pytest.approx(second["ball_r2"])
    for result in (first, second):
        assert 0.0 <= result["side_accuracy"] <= 1.0 and 0.0 <= result["toward_ball"] <= 1.0
        assert sum(result["action_share"].values()) == pytest.approx(1.0)
    assert "observations" in capsys.readouterr().out


def test_a_directory_without_a_network_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error:") and "checkpoints/step_N" in error and "\n" not in error
