"""The three views of an Atari game: same dynamics, their own observation spaces, and the shared extras."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401
from llm_gym.envs.atari.upscale import RowCachedResize


def _actions(n: int, count: int, seed: int = 0) -> list[int]:
    return [int(a) for a in np.random.default_rng(seed).integers(n, size=count)]


@pytest.mark.parametrize("game", ["Breakout", "Pong"])
def test_all_modes_share_one_game(game: str) -> None:
    """Same seed and actions give the same rewards and game states in every mode."""
    traces = {}
    for mode in ("text", "ascii", "vision"):
        env = gym.make(f"LLM{game}-{mode}-v0")
        _, info = env.reset(seed=3)
        trace = []
        for action in _actions(env.action_space.n, 300):
            _, reward, terminated, truncated, info = env.step(action)
            trace.append((reward, terminated, info["game_state"].ball_x, info["score"]))
            if terminated or truncated:
                break
        traces[mode] = trace
    assert traces["text"] == traces["ascii"] == traces["vision"]


def test_text_observation_is_short_and_complete() -> None:
    env = gym.make("LLMBreakout-text-v0")
    obs, info = env.reset(seed=0)
    for action in [1] * 12:
        obs, *_, info = env.step(action)
    state = info["game_state"]
    assert f"paddle x={state.paddle_x}" in obs and "lives 5" in obs and "bricks 108/108" in obs
    assert f"ball x={state.ball_x} y={state.ball_y} moving" in obs
    assert "actions: 0 NOOP, 1 FIRE, 2 RIGHT, 3 LEFT" in obs
    assert len(obs) < 200, "every token costs an LM forward pass"


def test_pong_text_uses_up_and_down() -> None:
    env = gym.make("LLMPong-v0")
    obs, info = env.reset(seed=0)
    assert info["action_names"] == ("NOOP", "FIRE", "UP", "DOWN", "UPFIRE", "DOWNFIRE")
    assert "your paddle y=" in obs and "cpu paddle not in view" in obs  # not drawn yet at the start of a game
    for _ in range(20):
        obs, *_ = env.step(0)
    assert "cpu paddle y=" in obs


@pytest.mark.parametrize(
    ("kwargs", "shape"), [({}, (24, 80)), ({"preset": "compact"}, (16, 32)), ({"rows": 12, "cols": 40}, (12, 40))]
)
def test_ascii_grid_size(kwargs: dict, shape: tuple[int, int]) -> None:
    env = gym.make("LLMBreakout-ascii-v0", **kwargs)
    obs, _ = env.reset(seed=0)
    lines = obs.split("\n")
    assert (len(lines), {len(line) for line in lines}) == (shape[0], {shape[1]})
    assert lines[0].startswith("score 0 lives 5")
    assert sum(line.count("#") for line in lines) > 0 and sum(line.count("=") for line in lines) > 0
    assert env.observation_space.contains(obs)


def test_ascii_shows_every_brick_row_and_breaks() -> None:
    env = gym.make("LLMBreakout-ascii-v0", preset="compact")
    obs, info = env.reset(seed=1)
    full = obs.count("#")
    bricks = info["game_state"].bricks_left
    policy = env.unwrapped.game.scripted_action
    names = env.unwrapped.ale_action_names
    while info["game_state"].bricks_left == bricks:
        obs, *_, info = env.step(names.index(policy(info["game_state"])))
    assert obs.count("#") <= full


def test_ascii_rejects_tiny_grids_and_unknown_presets() -> None:
    with pytest.raises(ValueError, match="at least 4 rows"):
        gym.make("LLMBreakout-ascii-v0", rows=2, cols=40)
    with pytest.raises(ValueError, match="unknown ASCII preset"):
        gym.make("LLMBreakout-ascii-v0", preset="huge")


@pytest.mark.parametrize("size", [(384, 384), (210, 160), (100, 64)])
def test_vision_image_is_the_scaled_frame(size: tuple[int, int]) -> None:
    env = gym.make("LLMPong-vision-v0", image_size=size, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    for action in _actions(6, 30):
        obs, *_ = env.step(action)
    frame = env.render()
    rows = np.arange(size[0]) * 210 // size[0]
    cols = np.arange(size[1]) * 160 // size[1]
    assert obs["image"].shape == (*size, 3) and obs["image"].dtype == np.uint8
    assert np.array_equal(obs["image"], frame[rows][:, cols])
    assert obs["text"].startswith("you ")


def test_row_cached_resize_is_exact_after_arbitrary_frames() -> None:
    rng = np.random.default_rng(0)
    resize = RowCachedResize((210, 160), 384, 384)
    rows, cols = np.arange(384) * 210 // 384, np.arange(384) * 160 // 384
    frame = rng.integers(0, 255, (210, 160, 3), dtype=np.uint8)
    for _ in range(20):
        changed = rng.integers(0, 210, size=rng.integers(0, 30))
        frame[changed] = rng.integers(0, 255, (len(changed), 160, 3), dtype=np.uint8)
        image = resize(frame)
        assert np.array_equal(image, frame[rows][:, cols])
        image[:] = 0  # callers may write into what they got; the cache must not see it
    assert np.array_equal(resize(frame), frame[rows][:, cols])


def test_reward_shaping_is_potential_based() -> None:
    """Shaped minus raw rewards telescope: over an episode they sum to -coef * phi(s0) (phi(terminal) = 0)."""
    coef, gamma = 0.5, 1.0
    env = gym.make("LLMBreakout-text-v0", reward_shaping=coef, shaping_gamma=gamma)
    _, info = env.reset(seed=0)
    phi0 = env.unwrapped.game.potential(info["game_state"])
    bonus = 0.0
    for action in _actions(4, 5000):
        _, reward, terminated, truncated, info = env.step(action)
        assert reward == info["shaped_reward"]
        bonus += info["shaped_reward"] - info["raw_reward"]
        if terminated or truncated:
            break
    assert terminated
    assert bonus == pytest.approx(-coef * phi0, abs=1e-9)


def test_shaping_is_off_by_default() -> None:
    env = gym.make("LLMBreakout-text-v0")
    env.reset(seed=0)
    for action in _actions(4, 200):
        _, reward, *_, info = env.step(action)
        assert reward == info["raw_reward"] == info["shaped_reward"]


def test_task_ids_select_mode_and_difficulty() -> None:
    env = gym.make("LLMBreakout-text-v0", repeat_action_probability=0.0)
    unwrapped = env.unwrapped
    assert unwrapped.num_tasks == len(unwrapped.ale.getAvailableModes()) * len(unwrapped.ale.getAvailableDifficulties())

    def trace(task_id: int) -> list:
        _, info = env.reset(seed=0, options={"task_id": task_id})
        assert info["task_id"] == task_id
        return [env.step(a)[1:3] + (env.unwrapped.game_state.ball_x,) for a in _actions(4, 300)]

    base = trace(0)
    assert trace(0) == base, "a task id is deterministic"
    assert any(trace(t) != base for t in range(1, unwrapped.num_tasks)), "task ids change the game"
    with pytest.raises(ValueError, match="task_id must be an int in 0.."):
        env.reset(seed=0, options={"task_id": unwrapped.num_tasks})


def test_clone_and_restore_replay_exactly() -> None:
    env = gym.make("LLMBreakout-text-v0").unwrapped
    env.reset(seed=0)
    for action in _actions(4, 50):
        env.step(action)
    snapshot = env.clone_state()
    first = [env.step(a)[:3] for a in _actions(4, 100, seed=1)]
    env.restore_state(snapshot)
    second = [env.step(a)[:3] for a in _actions(4, 100, seed=1)]
    assert first == second


def test_render_modes() -> None:
    env = gym.make("LLMPong-ascii-v0", render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.render() == obs
    env = gym.make("LLMPong-text-v0", render_mode="rgb_array")
    env.reset(seed=0)
    assert env.render().shape == (210, 160, 3)
    with pytest.raises(ValueError, match="render_mode"):
        gym.make("LLMPong-text-v0", render_mode="bogus")


def test_ale_settings_are_keyword_arguments() -> None:
    env = gym.make("LLMBreakout-text-v0", frameskip=1, repeat_action_probability=0.0, full_action_space=True)
    _, info = env.reset(seed=0)
    assert env.action_space.n == 18 and len(info["legal_actions"]) == 18
    _, _, _, _, info = env.step(0)
    assert info["episode_frame_number"] == 1


def test_vector_env_batches_text_observations() -> None:
    envs = gym.make_vec("LLMBreakout-text-v0", num_envs=3, vectorization_mode="sync")
    obs, infos = envs.reset(seed=0)
    assert len(obs) == 3 and all(isinstance(o, str) for o in obs)
    obs, rewards, *_ = envs.step(np.array([1, 2, 3]))
    assert rewards.shape == (3,)
    envs.close()


@pytest.mark.parametrize("game", ["Breakout", "Pong"])
def test_incremental_ascii_equals_a_fresh_drawing(game: str) -> None:
    env = gym.make(f"LLM{game}-ascii-v0", preset="compact")
    obs, info = env.reset(seed=2)
    fresh = type(env.unwrapped.game)
    names = env.unwrapped.ale_action_names
    for step in range(400):
        state = info["game_state"]
        assert obs == fresh(16, 32).draw(state), f"step {step}"
        action = names.index(env.unwrapped.game.scripted_action(state)) if step % 3 else int(step % len(names))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()


@pytest.mark.parametrize("game", ["Breakout", "Pong"])
def test_ball_trail_marks_the_previous_ball_cell_and_nothing_else(game: str) -> None:
    """With ``ball_trail`` the grid is the plain grid plus one '.' where the ball was a step earlier, on an empty
    cell only (not under the 'o' when the ball stayed in its cell, never over a paddle, wall or brick)."""
    plain = gym.make(f"LLM{game}-ascii-v0", preset="compact", fire_on_reset=True)
    trail = gym.make(f"LLM{game}-ascii-v0", preset="compact", fire_on_reset=True, ball_trail=True)
    plain_obs, _ = plain.reset(seed=4)
    trail_obs, info = trail.reset(seed=4)
    grid = trail.unwrapped.game.grid
    dots = 0
    for action in _actions(plain.action_space.n, 300, seed=1):
        plain_obs, *_ = plain.step(action)
        trail_obs, _, terminated, truncated, info = trail.step(action)
        assert trail_obs.replace(".", " ") == plain_obs
        state = info["game_state"]
        marked = [divmod(i, grid.cols + 1) for i, char in enumerate(trail_obs) if char == "."]
        expected = []
        if state.ball_x is not None and state.previous_ball_x is not None:
            cell = (grid.row(state.previous_ball_y + 2), grid.col(state.previous_ball_x + 1))
            row, col = cell
            if plain_obs.splitlines()[row][col] == " ":
                expected = [cell]
        assert marked == expected
        dots += len(marked)
        if terminated or truncated:
            break
    assert dots > 10


def test_ball_trail_is_off_by_default_and_must_be_a_bool() -> None:
    assert not gym.make("LLMBreakout-ascii-v0").unwrapped.game.ball_trail
    with pytest.raises(ValueError, match="ball_trail must be true or false"):
        gym.make("LLMBreakout-ascii-v0", ball_trail="yes")
