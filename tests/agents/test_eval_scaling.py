"""Every learner's evaluation scales with its run (llm_gym.training.loop.scaled_eval_steps): a tiny run ends in minutes,
a long run keeps whole games, and a short board game is never cut."""

from __future__ import annotations

from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.agents.reflection.train import eval_max_steps
from llm_gym.training.loop import MIN_EPISODE_CUT, scaled_eval_steps


def test_a_tiny_reflection_run_evaluates_short_episodes() -> None:
    # One iteration of two 40-step Pong episodes: 4 evaluation episodes of 64 steps, not 4 games of up to 1,000.
    tiny = ReflectionConfig(iterations=1, episodes=2, max_steps=40)
    assert eval_max_steps(tiny) == 64
    assert eval_max_steps(ReflectionConfig()) == 1000  # 3 x 20 x 1,000 trial steps: the configured cut


def test_many_evaluation_episodes_still_play_a_board_game_whole() -> None:
    assert scaled_eval_steps(2000, 100, 0) == MIN_EPISODE_CUT  # 256 decisions over 100 episodes would be 2 each
    assert scaled_eval_steps(30, 100, 0) == 30  # the configured cut still wins
