"""Lockstep episodes: results do not depend on how many envs run side by side; videos stream to disk."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import imageio.v3 as iio
import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import RandomPolicy, ScriptedPolicy
from llm_gym.errors import UnsupportedEnvError
from llm_gym.stats import format_mean_ci, mean_ci95
from llm_gym.training.evaluation import VideoWarning, run_episodes

ENV = EnvConfig("LLMPong-text-v0")


def test_results_do_not_depend_on_num_envs() -> None:
    policy = ScriptedPolicy(ENV)
    one = run_episodes(policy, ENV, 3, seed=10, num_envs=1, max_steps=120)
    three = run_episodes(policy, ENV, 3, seed=10, num_envs=3, max_steps=120)
    assert [(r.seed, r.episode_return, r.length) for r in one] == [(r.seed, r.episode_return, r.length) for r in three]
    assert all(r.truncated and r.length == 120 for r in one)


def test_video_of_the_first_episode(tmp_path: Path) -> None:
    path = tmp_path / "v.mp4"
    run_episodes(ScriptedPolicy(ENV), ENV, 2, max_steps=40, video_path=path, num_envs=2)
    frames = iio.imread(path)
    assert frames.shape[0] == 41 and frames.shape[1:] == (210, 160, 3)


def test_a_video_that_cannot_be_written_warns_once_and_the_episodes_go_on(tmp_path: Path) -> None:
    # A .tif path takes imageio's TIFF writer, which rejects fps: the TypeError a machine without the ffmpeg plugin
    # raised for .mp4 paths from deep in imageio.
    path = tmp_path / "v.tif"
    with pytest.warns(VideoWarning, match="pip install imageio-ffmpeg") as caught:
        results = run_episodes(ScriptedPolicy(ENV), ENV, 2, max_steps=30, video_path=path, num_envs=2)
    ours = [w for w in caught if issubclass(w.category, VideoWarning)]
    assert len(ours) == 1 and "TypeError" in str(ours[0].message)
    assert [r.length for r in results] == [30, 30]


class CountdownEnv(gym.Env):
    """A text-only env (no frames to render): say a number, the episode ends after three steps."""

    metadata: dict = {"render_modes": []}
    observation_space = gym.spaces.Discrete(4)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = 3
        return self.left, {"legal_actions": [0, 1]}

    def step(self, action):
        self.left -= 1
        return self.left, float(action), self.left == 0, False, {"legal_actions": [0, 1]}


def test_video_needs_frames(tmp_path: Path) -> None:
    gym.register("CountdownTest-v0", entry_point=CountdownEnv)
    env = EnvConfig("CountdownTest-v0")
    try:
        assert run_episodes(RandomPolicy(0), env, 2)[0].length == 3
        with pytest.raises(UnsupportedEnvError, match="cannot record a video"):
            run_episodes(RandomPolicy(0), env, 1, video_path=tmp_path / "x.mp4")
    finally:
        gym.registry.pop("CountdownTest-v0")


def test_mean_ci95() -> None:
    mean, half = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / 3**0.5, rel=1e-3)
    assert format_mean_ci([5.0]) == "5.00 (n=1)"
