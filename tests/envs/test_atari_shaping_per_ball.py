"""``shaping_per_ball`` on the real ALE: the step that loses a ball pays no shaping back, a ball's flight sums to
``coef * (phi(last) - phi(first))`` with gamma 1, no ball in play earns nothing, and snapshots carry the state."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401

NOOP, FIRE = 0, 1
COEF = 10.0


def _training_env(**kwargs) -> gym.Env:
    return gym.make(
        "LLMBreakout-text-v0", reward_shaping=COEF, repeat_action_probability=0.0, fire_on_reset=True,
        terminal_on_life_loss=True, **kwargs,
    )  # fmt: skip


def _one_life(env: gym.Env, seed: int) -> tuple[list[float], list[float | None], list[float]]:
    """Play NOOP until the life ends: shaping terms, the potential after each step, and the raw rewards."""
    _, info = env.reset(seed=seed)
    game = env.unwrapped.game
    terms, potentials, raws = [], [game.potential(info["game_state"])], []
    terminated = False
    while not terminated:
        _, reward, terminated, _, info = env.step(NOOP)
        terms.append(reward - info["raw_reward"])
        raws.append(info["raw_reward"])
        in_play = game.ball_in_play(info["game_state"])
        potentials.append(game.potential(info["game_state"]) if in_play else None)
    return terms, potentials, raws


def test_the_default_pays_the_misalignment_back_when_the_ball_is_lost() -> None:
    """What the option is for: by default the loss step pays ``coef * |phi|`` of the step before it."""
    terms, potentials, _ = _one_life(_training_env(), seed=3)
    assert potentials[-1] is None and potentials[-2] < -0.1
    assert terms[-1] == pytest.approx(-COEF * potentials[-2])  # several bricks' worth, for losing the ball


@pytest.mark.parametrize("seed", [0, 3])
def test_per_ball_pays_nothing_for_the_loss_and_sums_to_the_last_minus_the_first(seed: int) -> None:
    default_terms, _, default_raws = _one_life(_training_env(shaping_gamma=1.0), seed)
    terms, potentials, raws = _one_life(_training_env(shaping_per_ball=True, shaping_gamma=1.0), seed)
    assert raws == default_raws  # the option changes only the reward
    assert terms[-1] == 0.0 and default_terms[-1] > 0.0
    assert sum(terms) == pytest.approx(COEF * (potentials[-2] - potentials[0]))
    assert terms[:-1] == pytest.approx(default_terms[:-1])  # while the ball flies, the default's terms


def test_per_ball_pays_nothing_while_no_ball_is_in_play() -> None:
    """Without fire_on_reset a policy that never serves earns exactly 0, as under the default."""
    env = gym.make("LLMBreakout-text-v0", reward_shaping=COEF, shaping_per_ball=True)
    env.reset(seed=0)
    for _ in range(50):
        _, reward, _, _, info = env.step(NOOP)
        assert reward == 0.0 and info["game_state"].ball_x is None
    _, reward, _, _, info = env.step(FIRE)  # the serve starts a flight: nothing paid for where the ball appears
    assert reward == info["raw_reward"] == 0.0


def test_per_ball_restarts_at_the_serve_after_a_life_loss_within_an_episode() -> None:
    """With whole games (no terminal_on_life_loss) the loss-and-serve step pays nothing and the next step's term
    starts from the new ball's potential."""
    env = gym.make(
        "LLMBreakout-text-v0", reward_shaping=COEF, shaping_per_ball=True, fire_on_reset=True,
        repeat_action_probability=0.0,
    )  # fmt: skip
    _, info = env.reset(seed=3)
    lives = info["lives"]
    while info["lives"] == lives:
        _, reward, _, _, info = env.step(NOOP)
    assert reward - info["raw_reward"] == 0.0 and env.unwrapped.game.ball_in_play(info["game_state"])
    served = env.unwrapped.game.potential(info["game_state"])
    _, reward, _, _, info = env.step(NOOP)
    assert reward - info["raw_reward"] == pytest.approx(
        COEF * (0.99 * env.unwrapped.game.potential(info["game_state"]) - served)
    )


def test_snapshots_carry_the_flight() -> None:
    env = _training_env(shaping_per_ball=True)
    env.reset(seed=0)
    for _ in range(5):
        env.step(NOOP)
    snapshot = env.unwrapped.clone_state()
    expected = [env.step(a)[1] for a in (2, 2, 3, NOOP)]
    other = _training_env(shaping_per_ball=True)
    other.reset(seed=5)
    other.unwrapped.restore_state(snapshot)
    assert [other.step(a)[1] for a in (2, 2, 3, NOOP)] == expected
