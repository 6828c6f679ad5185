"""The RAM offsets the Atari views read are checked against the rendered frame, not assumed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401
from llm_gym.envs.atari.breakout import BRICK_COLS, BRICK_ROWS, BRICKS_TOP, LEFT_WALL, PADDLE_Y
from llm_gym.envs.atari.pong import CPU_X, FIELD_BOTTOM, FIELD_TOP, PLAYER_X

STEPS = 1500


def _play(env_id: str, steps: int, seed: int = 0):
    """Yield (state, frame, reward, info) under a noisy ball tracker (so the ball, paddles and bricks all move)."""
    env = gym.make(env_id, repeat_action_probability=0.0, render_mode="rgb_array")
    unwrapped = env.unwrapped
    names = unwrapped.ale_action_names
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        state = info["game_state"]
        action = names.index(unwrapped.game.scripted_action(state))
        if rng.random() < 0.25:
            action = int(rng.integers(len(names)))
        _, reward, terminated, truncated, info = env.step(action)
        yield info["game_state"], env.render(), reward, info
        if terminated or truncated:
            _, info = env.reset()
    env.close()


def _screen_bricks(frame: np.ndarray) -> np.ndarray:
    lit = frame[BRICKS_TOP : BRICKS_TOP + 36, LEFT_WALL : LEFT_WALL + 144].sum(axis=2) > 0
    return lit.reshape(BRICK_ROWS, 6, BRICK_COLS, 8).any(axis=(1, 3))


def test_breakout_ram_matches_frame() -> None:
    checked = {"paddle": 0, "ball": 0, "bricks": 0}
    previous_bricks = None
    score = 0.0
    for state, frame, reward, info in _play("LLMBreakout-text-v0", STEPS):
        lit = frame.sum(axis=2) > 0
        paddle_cols = np.flatnonzero(lit[PADDLE_Y : PADDLE_Y + 4, LEFT_WALL : LEFT_WALL + 144].any(axis=0)) + LEFT_WALL
        ball_low = state.ball_y is not None and state.ball_y > 180  # the ball would be drawn in the paddle rows
        if LEFT_WALL < state.paddle_x and state.paddle_x + 16 < LEFT_WALL + 144 and not ball_low:
            assert paddle_cols.min() == state.paddle_x and paddle_cols.max() == state.paddle_x + 15
            checked["paddle"] += 1
        inside = state.ball_x is not None and LEFT_WALL <= state.ball_x <= LEFT_WALL + 142
        if inside and 100 <= state.ball_y <= 180:  # between the bricks and the paddle, clear of the walls
            ys, xs = np.nonzero(lit[100:185, LEFT_WALL : LEFT_WALL + 144])
            assert len(xs), "RAM says a ball is in play but none is drawn"
            assert (xs.min() + LEFT_WALL, ys.min() + 100) == (state.ball_x, state.ball_y)
            checked["ball"] += 1
        bricks = np.asarray(state.bricks)
        # The frame lags a brick hit by a frame, so compare only when the wall did not change this step, and only
        # when the ball is not drawn inside the wall (it would light a broken brick's cell).
        ball_in_wall = state.ball_y is not None and state.ball_y < BRICKS_TOP + 36 + 4
        if previous_bricks is not None and np.array_equal(previous_bricks, bricks) and not ball_in_wall:
            assert np.array_equal(_screen_bricks(frame), bricks)
            assert state.bricks_left == int(bricks.sum())
            checked["bricks"] += 1
        previous_bricks = bricks
        if info["episode_frame_number"] <= 4:  # first step of a new episode
            score = 0.0
        score += reward
        assert state.score == score, "BCD score in RAM equals the summed rewards"
        assert state.lives == info["lives"]
    assert min(checked.values()) > 50, checked


def test_breakout_bricks_break() -> None:
    lefts = [state.bricks_left for state, *_ in _play("LLMBreakout-text-v0", 800, seed=1)]
    assert lefts[0] == BRICK_ROWS * BRICK_COLS
    assert min(lefts) < lefts[0]


def _colour_box(frame: np.ndarray, colour: tuple[int, int, int]) -> tuple[int, int, int, int] | None:
    field = frame[FIELD_TOP:FIELD_BOTTOM]
    ys, xs = np.nonzero((field == np.array(colour, dtype=np.uint8)).all(axis=2))
    if not len(xs):
        return None
    return int(xs.min()), int(xs.max()), int(ys.min()) + FIELD_TOP, int(ys.max()) + FIELD_TOP


def test_pong_ram_matches_frame() -> None:
    checked = {"ball": 0, "player": 0, "cpu": 0}
    ball_exact = 0
    player_points = cpu_points = 0
    for state, frame, reward, info in _play("LLMPong-text-v0", STEPS):
        ball = _colour_box(frame, (236, 236, 236))
        if state.ball_x is not None and ball is not None and FIELD_TOP < state.ball_y < FIELD_BOTTOM - 4:
            # The ball's line can lag the RAM by one when it moves mid-frame: exact mostly, never more than 1 px.
            assert ball[0] == state.ball_x and abs(ball[2] - state.ball_y) <= 1
            ball_exact += ball[2] == state.ball_y
            checked["ball"] += 1
        player = _colour_box(frame, (92, 186, 92))
        if player and FIELD_TOP < state.player_y and state.player_y + 16 < FIELD_BOTTOM:
            assert player[0] == PLAYER_X and player[2] == state.player_y
            checked["player"] += 1
        cpu = _colour_box(frame, (213, 130, 74))
        if cpu and FIELD_TOP < state.cpu_y and state.cpu_y + 16 < FIELD_BOTTOM:
            assert cpu[0] == CPU_X and cpu[2] == state.cpu_y
            checked["cpu"] += 1
        if info["episode_frame_number"] <= 4:  # first step of a new episode
            player_points = cpu_points = 0
        player_points += reward > 0
        cpu_points += reward < 0
        assert (state.player_score, state.cpu_score) == (player_points, cpu_points)
    assert min(checked.values()) > 50, checked
    assert ball_exact >= 0.85 * checked["ball"]


def test_pong_up_moves_the_paddle_up() -> None:
    env = gym.make("LLMPong-text-v0", repeat_action_probability=0.0)
    _, info = env.reset(seed=0)
    up, down = info["action_names"].index("UP"), info["action_names"].index("DOWN")
    for _ in range(3):
        _, _, _, _, info = env.step(down)
    low = info["game_state"].player_y
    for _ in range(3):
        _, _, _, _, info = env.step(up)
    assert info["game_state"].player_y < low


def test_pong_describes_nothing_the_frame_does_not_show() -> None:
    """After a reset the RAM holds a stale ball line and a CPU paddle above the field while neither is drawn; the
    first observation read ``cpu paddle y=7. ball x=-49 y=46`` and one step later ``cpu paddle y=-15``."""
    for seed in range(3):
        env = gym.make("LLMPong-text-v0", repeat_action_probability=0.0, render_mode="rgb_array")
        observation, info = env.reset(seed=seed)
        frames = [(observation, info["game_state"], env.render())]
        for _ in range(40):
            observation, *_, info = env.step(0)
            frames.append((observation, info["game_state"], env.render()))
        for observation, state, frame in frames:
            ball, cpu = _colour_box(frame, (236, 236, 236)), _colour_box(frame, (213, 130, 74))
            assert (state.ball_x is None) == (ball is None), (observation, ball)
            assert (state.cpu_y is None) == (cpu is None), (observation, cpu)
            assert "x=-49" not in observation and "y=-" not in observation
        assert "cpu paddle not in view. no ball in play." in frames[0][0]
        env.close()
