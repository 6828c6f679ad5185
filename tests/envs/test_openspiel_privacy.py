"""No observation shows another seat's private information, and the MCTS opponent searches only states its own seat
cannot tell apart from the real one.

The concrete test: take a real game position, change ONLY the opponent's private cards/dice, and check the learner's
whole observation text (and the PettingZoo text and tensor) is byte-for-byte the same, while the full state string
does change, so the check would catch a leak.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from llm_gym.envs.openspiel.catalog import game_spec
from llm_gym.envs.openspiel.core import load_game
from llm_gym.envs.openspiel.determinize import Determinizer
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.envs.openspiel.pettingzoo_env import OpenSpielAECEnv


def learner_text(env: OpenSpielEnv, state) -> str:
    """The observation the env would give its learner in ``state``."""
    saved, env.state = env.state, state
    try:
        return env._view(env.seat, state.legal_actions(env.seat), None)[0]
    finally:
        env.state = saved


def replay(game, history):
    state = game.new_initial_state()
    for action in history:
        state.apply_action(action)
    return state


def started(game: str, params: dict | None, seed: int, moves: int) -> OpenSpielEnv:
    """An env with the learner in seat 0, a few moves into the game, the learner to act."""
    env = OpenSpielEnv(game, params=params, seat=0)
    _, info = env.reset(seed=seed)
    for _ in range(moves):
        if env.state.is_terminal():
            break
        _, _, terminated, _, info = env.step(info["legal_actions"][-1])
        if terminated:
            _, info = env.reset(seed=seed + 100)
    return env


def assert_hidden(env: OpenSpielEnv, other_history: list[int]) -> None:
    real = env.state
    other = replay(env.game, other_history)
    assert str(other) != str(real), "the swap must change the true state, or the test proves nothing"
    assert learner_text(env, other) == learner_text(env, real)


@pytest.mark.parametrize("seed", range(4))
def test_kuhn_poker_hides_the_opponents_card(seed: int) -> None:
    env = started("kuhn_poker", None, seed, moves=0)
    history = list(env.state.history())
    mine, theirs = history[0], history[1]
    spare = ({0, 1, 2} - {mine, theirs}).pop()
    assert f"Your card: {'JQK'[mine]}" in learner_text(env, env.state)
    assert_hidden(env, [mine, spare, *history[2:]])


@pytest.mark.parametrize("seed", range(4))
def test_leduc_poker_hides_the_opponents_card(seed: int) -> None:
    env = started("leduc_poker", None, seed, moves=1)
    history = list(env.state.history())
    probe, dealt = env.game.new_initial_state(), []  # every card dealt so far: two private, maybe the public one
    for action in history:
        if probe.is_chance_node():
            dealt.append(action)
        probe.apply_action(action)
    for spare in sorted(set(range(6)) - set(dealt)):
        assert_hidden(env, [history[0], spare, *history[2:]])


@pytest.mark.parametrize("seed", range(4))
def test_liars_dice_hides_the_opponents_dice(seed: int) -> None:
    # two dice each; player 0's dice come first in the history
    env = started("liars_dice", {"numdice": 2}, seed, moves=1)
    history = list(env.state.history())
    their_dice = history[2:4]
    new_dice = [(d + 1) % 6 for d in their_dice]
    assert_hidden(env, [*history[:2], *new_dice, *history[4:]])
    assert learner_text(env, env.state).startswith("Liar's Dice: you are player 0")


@pytest.mark.parametrize(("game", "params"), [("hearts", None), ("euchre", None), ("gin_rummy", None),
                                              ("bridge", {"use_double_dummy_result": False}),  # card play: fast
                                              ("leduc_poker", {"players": 3}), ("kuhn_poker", {"players": 3})])  # fmt: skip
def test_card_games_show_the_same_text_for_every_deal_the_learner_cannot_tell_apart(game: str, params) -> None:
    env = started(game, params, seed=5, moves=3)
    rng = random.Random(0)
    texts, states = set(), set()
    for _ in range(12):
        other = env.state.resample_from_infostate(env.seat, rng.random)
        texts.add(learner_text(env, other))
        states.add(str(other))
    assert len(texts) == 1 and texts == {learner_text(env, env.state)}
    assert len(states) > 1


def test_pettingzoo_text_and_tensor_hide_the_opponents_card() -> None:
    env = OpenSpielAECEnv("kuhn_poker")
    env.reset(seed=0)
    real = env.state
    mine, theirs = real.history()[:2]
    spare = ({0, 1, 2} - {mine, theirs}).pop()
    seen = env.observe("player_0")
    env.state = replay(env.game, [mine, spare])
    swapped = env.observe("player_0")
    assert seen["text"] == swapped["text"]
    assert np.array_equal(seen["observation"], swapped["observation"])
    assert not np.array_equal(seen["observation"], env.observe("player_1")["observation"])


# -- what the MCTS opponent may search ------------------------------------------------------------------------------


@pytest.mark.parametrize(("game", "params", "moves"), [("liars_dice", {"numdice": 2}, 2), ("phantom_ttt", {}, 3),
                                                       ("leduc_poker", {}, 2)])  # fmt: skip
def test_determinized_states_match_the_searchers_information(game: str, params: dict, moves: int) -> None:
    pyspiel_game = load_game(game, params)
    rng = random.Random(1)
    state = pyspiel_game.new_initial_state()
    while moves or state.is_chance_node():
        if not state.is_chance_node():
            moves -= 1
        state.apply_action(rng.choice(state.legal_actions()))
    player = state.current_player()
    determinizer = Determinizer(pyspiel_game, game_spec(game).determinize, random.Random(2))
    samples = [determinizer.sample(state, player) for _ in range(10)]
    target = state.information_state_string(player)
    assert all(s.information_state_string(player) == target for s in samples)
    assert any(str(s) != str(state) for s in samples), "the hidden part should vary between samples"
    assert determinizer.fallbacks == 0
