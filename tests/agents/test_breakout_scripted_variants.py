"""The `scripted` agent's aims and dead bands (scripts/breakout_scripted_variants.py plays them): the landing point
reflects off the side walls, the defaults are the ball tracker (the same real games as the script's plain variant),
prediction changes play, and an aim a game lacks is refused in one line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig
from llm_gym.envs.atari.breakout import LEFT_WALL, PADDLE_Y, RIGHT_WALL, Breakout, BreakoutState, landing_x, reflect
from llm_gym.errors import UnsupportedEnvError
from llm_gym.evaluation import run_episodes
from llm_gym.plugins import get_agent

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "breakout_scripted_variants.py"
spec = importlib.util.spec_from_file_location("breakout_scripted_variants", SCRIPT)
variants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(variants)  # type: ignore[union-attr]


def state(ball: tuple[int, int] | None, previous: tuple[int, int] | None, paddle_x: int = 70) -> BreakoutState:
    return BreakoutState(
        paddle_x=paddle_x,
        ball_x=ball[0] if ball else None,
        ball_y=ball[1] if ball else None,
        ball_dx=0,
        ball_dy=0,
        lives=5,
        score=0,
        bricks=(),
        bricks_left=0,
        previous_ball_x=previous[0] if previous else None,
        previous_ball_y=previous[1] if previous else None,
    )


def test_the_landing_point_reflects_off_the_walls() -> None:
    high = RIGHT_WALL - 1
    assert reflect(50) == 50
    assert reflect(LEFT_WALL - 10) == LEFT_WALL + 10  # off the left wall
    assert reflect(high + 7) == high - 7  # off the right wall
    assert reflect(high + (high - LEFT_WALL) + 3) == LEFT_WALL + 3  # off both
    # Falling 3 px right per 2 px down from (100, 169): 20 px above the paddle row, so 30 px further right.
    assert landing_x(state((100, PADDLE_Y - 20), (97, PADDLE_Y - 22))) == pytest.approx(130)
    assert landing_x(state((100, 150), (97, 152))) is None  # rising
    assert landing_x(state((100, 150), None)) is None  # no previous position yet


def test_prediction_aims_where_the_ball_lands_not_where_it_is() -> None:
    game = Breakout.__new__(Breakout)  # scripted_action reads only the state
    falling_right = state((60, PADDLE_Y - 40), (56, PADDLE_Y - 42), paddle_x=54)  # ball over the paddle, heading right
    assert game.scripted_action(falling_right) == "NOOP"
    assert game.scripted_action(falling_right, aim="landing") == "RIGHT"
    # It lands at x=140: 79 px right of the paddle centre, inside an 80 px dead band.
    assert game.scripted_action(falling_right, aim="landing", deadband=80) == "NOOP"
    assert game.scripted_action(state(None, None), aim="landing") == "FIRE"
    rising = state((60, 150), (56, 152), paddle_x=54)  # no landing point: the ball itself is the target
    assert game.scripted_action(rising, aim="landing") == game.scripted_action(rising) == "NOOP"


def test_an_aim_the_game_lacks_and_a_negative_dead_band_are_refused() -> None:
    agent = get_agent("scripted")
    with pytest.raises(UnsupportedEnvError, match="cannot aim at 'landing' in LLMPong-text-v0.*--set aim=ball"):
        agent(agent.Config(aim="landing")).policy(EnvConfig("LLMPong-text-v0"))
    with pytest.raises(ValueError, match="deadband must be >= 0"):
        agent.Config(deadband=-1)


def test_the_plain_variant_plays_the_scripted_agents_games() -> None:
    env = EnvConfig("LLMBreakout-text-v0", {"fire_on_reset": True})
    scripted = get_agent("scripted")(get_agent("scripted").Config()).policy(env)
    expected = run_episodes(scripted, env, 2, seed=100, num_envs=2, max_steps=300)
    plain = variants.play(variants.Variant(8, predict=False), games=2, seed=100, max_steps=300)
    assert plain["returns"] == [r.episode_return for r in expected] and plain["returns"] != [0.0, 0.0]
    assert plain["lengths"] == [r.length for r in expected]
    predicted = variants.play(variants.Variant(12, predict=True), games=2, seed=100, max_steps=300)
    assert predicted["returns"] != plain["returns"] or predicted["lengths"] != plain["lengths"]
    landing = get_agent("scripted")(get_agent("scripted").Config(aim="landing", deadband=12)).policy(env)
    again = run_episodes(landing, env, 2, seed=100, num_envs=2, max_steps=300)
    assert predicted["returns"] == [r.episode_return for r in again]  # the agent's settings are the variant
