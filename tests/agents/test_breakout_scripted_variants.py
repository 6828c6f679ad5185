"""scripts/breakout_scripted_variants.py: the landing point reflects off the side walls, the variant without
prediction and with an 8 px dead band is the `scripted` agent (the same real games), and prediction changes play."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig
from llm_gym.envs.atari.breakout import LEFT_WALL, PADDLE_Y, RIGHT_WALL, BreakoutState
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
    assert variants.reflect(50) == 50
    assert variants.reflect(LEFT_WALL - 10) == LEFT_WALL + 10  # off the left wall
    assert variants.reflect(high + 7) == high - 7  # off the right wall
    assert variants.reflect(high + (high - LEFT_WALL) + 3) == LEFT_WALL + 3  # off both
    # Falling 3 px right per 2 px down from (100, 169): 20 px above the paddle row, so 30 px further right.
    assert variants.landing_x(state((100, PADDLE_Y - 20), (97, PADDLE_Y - 22))) == pytest.approx(130)
    assert variants.landing_x(state((100, 150), (97, 152))) is None  # rising
    assert variants.landing_x(state((100, 150), None)) is None  # no previous position yet


def test_prediction_aims_where_the_ball_lands_not_where_it_is() -> None:
    falling_right = state((60, PADDLE_Y - 40), (56, PADDLE_Y - 42), paddle_x=54)  # ball over the paddle, heading right
    assert variants.Variant(8, predict=False).choose(falling_right) == "NOOP"
    assert variants.Variant(8, predict=True).choose(falling_right) == "RIGHT"
    assert variants.Variant(8, predict=True).choose(state(None, None)) == "FIRE"


def test_the_plain_variant_plays_the_scripted_agents_games() -> None:
    env = EnvConfig("LLMBreakout-text-v0", {"fire_on_reset": True})
    scripted = get_agent("scripted")(get_agent("scripted").Config()).policy(env)
    expected = run_episodes(scripted, env, 2, seed=100, num_envs=2, max_steps=300)
    plain = variants.play(variants.Variant(8, predict=False), games=2, seed=100, max_steps=300)
    assert plain["returns"] == [r.episode_return for r in expected] and plain["returns"] != [0.0, 0.0]
    assert plain["lengths"] == [r.length for r in expected]
    predicted = variants.play(variants.Variant(8, predict=True), games=2, seed=100, max_steps=300)
    assert predicted["returns"] != plain["returns"] or predicted["lengths"] != plain["lengths"]
