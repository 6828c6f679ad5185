"""The serve and life-loss treatments of the Atari envs (``fire_on_reset``, ``terminal_on_life_loss``) on the real
ALE: what they change, what stays the raw ALE v5 game, that snapshots carry them, and that reward shaping pays
nothing for keeping the ball out of play."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import llm_gym  # noqa: F401
from llm_gym.agent import EnvConfig
from llm_gym.envs.catalog import make
from llm_gym.errors import ConfigError, EnvInputError
from llm_gym.training.loop import evaluation_env, training_env

NOOP, FIRE = 0, 1


def _until_life_lost(env: gym.Env, info: dict, action: int = NOOP, limit: int = 500) -> tuple:
    lives = info["lives"]
    for _ in range(limit):
        obs, reward, terminated, truncated, info = env.step(action)
        if info["lives"] < lives or terminated or truncated:
            return obs, reward, terminated, truncated, info
    raise AssertionError("no life lost")


def test_raw_game_is_the_default_and_stalls_without_fire() -> None:
    """Without the options the env is ALE v5 as is: a policy that never presses FIRE never sees a ball."""
    env = gym.make("LLMBreakout-text-v0")
    assert not env.unwrapped.fire_on_reset and not env.unwrapped.terminal_on_life_loss
    obs, info = env.reset(seed=0)
    for _ in range(300):
        obs, _, terminated, truncated, info = env.step(NOOP)
        assert info["game_state"].ball_x is None and not (terminated or truncated)
    assert "no ball in play: FIRE to serve" in obs and info["lives"] == 5 and info["score"] == 0


@pytest.mark.parametrize("mode", ["text", "ascii"])
def test_fire_on_reset_serves_after_reset_and_every_life_loss(mode: str) -> None:
    env = gym.make(f"LLMBreakout-{mode}-v0", fire_on_reset=True)
    _, info = env.reset(seed=1)
    assert info["game_state"].ball_x is not None, "the reset itself served"
    seen_lives = {info["lives"]}
    terminated = False
    while not terminated:
        _, _, terminated, truncated, info = env.step(NOOP)
        assert not truncated
        if not terminated:  # between lives the ball is never left waiting for a serve
            assert info["game_state"].ball_x is not None and not info["game_over"]
            seen_lives.add(info["lives"])
    assert seen_lives == {5, 4, 3, 2, 1} and info["lives"] == 0 and info["game_over"]


def test_fire_after_a_life_loss_is_part_of_that_step() -> None:
    """The step that loses a life comes back with the next ball already in play and its frames counted."""
    env = gym.make("LLMBreakout-text-v0", repeat_action_probability=0.0, fire_on_reset=True)
    _, info = env.reset(seed=0)
    frames = info["episode_frame_number"]
    _, _, terminated, _, info = _until_life_lost(env, info)
    assert not terminated and info["lives"] == 4 and info["game_state"].ball_x is not None
    assert info["episode_frame_number"] > frames


def test_pong_fire_on_reset_presses_once() -> None:
    """Pong serves by itself: FIRE is pressed once on reset (as FireResetEnv does), not repeated."""
    env = gym.make("LLMPong-text-v0", fire_on_reset=True, repeat_action_probability=0.0)
    _, info = env.reset(seed=0)
    assert info["episode_frame_number"] == 4  # one press of 4 frames
    raw = gym.make("LLMPong-text-v0", repeat_action_probability=0.0)
    _, raw_info = raw.reset(seed=0)
    assert raw_info["episode_frame_number"] == 0


def test_terminal_on_life_loss_ends_the_episode_and_reset_continues_the_game() -> None:
    env = gym.make("LLMBreakout-text-v0", fire_on_reset=True, terminal_on_life_loss=True)
    _, info = env.reset(seed=0)
    frames_before = info["episode_frame_number"]
    for life in (4, 3, 2, 1):
        _, _, terminated, truncated, info = _until_life_lost(env, info, limit=200)
        assert terminated and not truncated and info["lives"] == life and not info["game_over"]
        # A seed and a task id do not start a new game while lives are left: the same game goes on.
        _, info = env.reset(seed=999, options={"task_id": 1})
        assert info["lives"] == life and info["task_id"] == 0
        assert info["episode_frame_number"] > frames_before, "the emulator went on, it was not reset"
        assert info["game_state"].ball_x is not None
        frames_before = info["episode_frame_number"]
    _, _, terminated, _, info = _until_life_lost(env, info, limit=200)
    assert terminated and info["game_over"] and info["lives"] == 0
    _, info = env.reset(seed=5)
    assert info["lives"] == 5 and info["episode_frame_number"] < frames_before, "game over: a new game"


def test_new_game_option_forces_a_fresh_game() -> None:
    env = gym.make("LLMBreakout-text-v0", terminal_on_life_loss=True, repeat_action_probability=0.0)
    _, info = env.reset(seed=0)
    _, info = env.step(FIRE)[::4]
    _, _, terminated, _, info = _until_life_lost(env, info)
    assert terminated and info["lives"] == 4
    fresh, info = env.reset(seed=0, options={"new_game": True})
    again, _ = gym.make("LLMBreakout-text-v0", repeat_action_probability=0.0).reset(seed=0)
    assert info["lives"] == 5 and fresh == again
    with pytest.raises(EnvInputError, match="new_game must be True or False"):
        env.reset(options={"new_game": "yes"})


def test_without_fire_a_continued_game_waits_for_the_agent_to_serve() -> None:
    env = gym.make("LLMBreakout-text-v0", terminal_on_life_loss=True, repeat_action_probability=0.0)
    _, info = env.reset(seed=0)
    env.step(FIRE)
    _, _, terminated, _, info = _until_life_lost(env, info)
    obs, info = env.reset()
    assert info["lives"] == 4 and info["game_state"].ball_x is None and "FIRE to serve" in obs


def test_snapshots_carry_the_pending_continuation() -> None:
    """A snapshot taken right after a life-loss end (what a checkpoint holds) makes the next reset continue the
    game in a fresh env too, and pickles."""
    kwargs = {"fire_on_reset": True, "terminal_on_life_loss": True}
    env = gym.make("LLMBreakout-text-v0", **kwargs)
    _, info = env.reset(seed=3)
    _, _, terminated, _, info = _until_life_lost(env, info, limit=200)
    assert terminated and info["lives"] == 4
    snapshot = pickle.loads(pickle.dumps(env.unwrapped.clone_state()))
    expected_obs, expected_info = env.reset(seed=7)
    other = gym.make("LLMBreakout-text-v0", **kwargs)
    other.reset(seed=11)
    other.unwrapped.restore_state(snapshot)
    obs, info = other.reset(seed=7)
    assert obs == expected_obs and info["lives"] == 4
    assert info["episode_frame_number"] == expected_info["episode_frame_number"]


@pytest.mark.parametrize("kwargs", [{"fire_on_reset": True}, {"fire_on_reset": True, "terminal_on_life_loss": True}])
def test_envs_with_options_pass_gymnasiums_checker(kwargs: dict) -> None:
    check_env(gym.make("LLMBreakout-text-v0", **kwargs).unwrapped, skip_render_check=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fire_on_reset": "yes"}, "fire_on_reset must be true or false"),
        ({"fire_on_reset": 1}, "fire_on_reset must be true or false"),
        ({"terminal_on_life_loss": None}, "terminal_on_life_loss must be true or false"),
        ({"shaping_per_ball": "true"}, "shaping_per_ball must be true or false"),
    ],
)
def test_options_are_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make("LLMBreakout-text-v0", **kwargs)


def test_training_and_evaluation_envs() -> None:
    """Learning agents train with FIRE and life-loss ends, evaluate whole games with FIRE; the user's args win;
    families without training defaults are unchanged."""
    atari = EnvConfig("LLMBreakout-text-v0", {"reward_shaping": 10.0})
    assert training_env(atari).kwargs == {"fire_on_reset": True, "terminal_on_life_loss": True, "reward_shaping": 10.0}
    assert evaluation_env(atari).kwargs == {
        "fire_on_reset": True,
        "terminal_on_life_loss": False,
        "reward_shaping": 10.0,
    }
    raw = EnvConfig("LLMBreakout-text-v0", {"fire_on_reset": False, "terminal_on_life_loss": False})
    assert training_env(raw).kwargs == evaluation_env(raw).kwargs == dict(raw.kwargs)
    assert training_env(EnvConfig("Trace-v0", {"level": 1})).kwargs == {"level": 1}
    assert evaluation_env(EnvConfig("OpenSpiel-tic_tac_toe-v0")).kwargs == {}


# -- reward shaping and the serve -------------------------------------------------------------------------------------


def test_shaping_pays_nothing_for_keeping_the_ball_out_of_play() -> None:
    """With no ball in play the potential is 0, so every step of a stalled game has a shaped reward of exactly 0."""
    env = gym.make("LLMBreakout-text-v0", reward_shaping=10.0, repeat_action_probability=0.0)
    env.reset(seed=0)
    for action in [NOOP, 2, 3] * 50:  # move about, never serve
        _, reward, _, _, info = env.step(action)
        assert info["game_state"].ball_x is None and reward == 0.0 and info["raw_reward"] == 0.0


@pytest.mark.parametrize("gamma", [1.0, 0.99])
def test_shaping_telescopes_so_stalling_never_beats_serving(gamma: float) -> None:
    """The shaping terms telescope: from a state without a ball to the next one without a ball (a ball served, then
    lost) they sum to exactly 0 with gamma 1, and with gamma < 1 to sum((gamma - 1) * phi) >= 0 -- never below the
    0 a stalled game earns, so shaping cannot make keeping the ball out of play the better plan. The same holds
    with ``fire_on_reset`` over a whole game (the potential is 0 at its end)."""
    env = gym.make(
        "LLMBreakout-text-v0", reward_shaping=10.0, shaping_gamma=gamma, repeat_action_probability=0.0
    )  # fmt: skip
    _, info = env.reset(seed=0)
    _, reward, _, _, info = env.step(FIRE)
    shaping, steps = reward - info["raw_reward"], 1
    while info["game_state"].ball_x is not None or steps == 1:
        _, reward, _, _, info = env.step(NOOP)
        shaping, steps = shaping + reward - info["raw_reward"], steps + 1
    assert steps > 10 and info["lives"] == 4
    assert shaping == pytest.approx(0.0, abs=1e-9) if gamma == 1.0 else shaping > 0.0

    served = gym.make(
        "LLMBreakout-text-v0", reward_shaping=10.0, shaping_gamma=gamma, repeat_action_probability=0.0,
        fire_on_reset=True,
    )  # fmt: skip
    _, info = served.reset(seed=0)
    start, total, terminated = served.unwrapped.game.potential(info["game_state"]), 0.0, False
    while not terminated:
        _, reward, terminated, _, info = served.step(NOOP)
        total += reward - info["raw_reward"]
    assert start < 0.0 and total >= -10.0 * start - 1e-9  # = -coef * phi(first state) with gamma 1, more below 1


def test_restore_brings_back_the_action_sticky_actions_repeat() -> None:
    """ALE's cloneState leaves out the last action, which sticky actions repeat; restore_state primes it, so a
    snapshot replays exactly in an env whose own last action was another one (what a resume does)."""
    for seed in range(10):
        env = gym.make("LLMBreakout-text-v0")
        env.reset(seed=seed)
        for _ in range(3):
            env.step(NOOP)
        snapshot = env.unwrapped.clone_state()
        expected = [env.step(a)[0] for a in (FIRE, 2, 2, 2)]
        other = gym.make("LLMBreakout-text-v0")
        other.reset(seed=11)
        other.step(3)
        other.unwrapped.restore_state(snapshot)
        assert [other.step(a)[0] for a in (FIRE, 2, 2, 2)] == expected, seed
