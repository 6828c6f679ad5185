"""Action names: the per-(seat, action) cache is only used where OpenSpiel's names do not depend on the state."""

from __future__ import annotations

import random

import pytest

from llm_gym.envs.openspiel.catalog import GAMES
from llm_gym.envs.openspiel.core import load_game, sample_chance
from llm_gym.envs.openspiel.moves import ActionNamer
from llm_gym.envs.openspiel.text import ascii_text


@pytest.mark.parametrize("spec", [g for g in GAMES if g.static_action_names], ids=lambda s: s.name)
def test_cached_names_equal_fresh_names_over_random_play(spec) -> None:
    rng = random.Random(0)
    # bridge's task variants end in a double-dummy solve (seconds); card play has the same bidding and more names
    variants = [{"use_double_dummy_result": False}] if spec.name == "bridge" else spec.variants[:2]
    for params in variants:
        game = load_game(spec.name, params)
        namer = ActionNamer(game.num_players(), static=True)
        for _ in range(3):
            state, plies = game.new_initial_state(), 0
            while not state.is_terminal() and plies < 120:
                if state.is_chance_node():
                    action = sample_chance(state, rng)
                    assert namer.name(state, -1, action) == ascii_text(state.action_to_string(-1, action))
                    state.apply_action(action)
                    continue
                players = range(game.num_players()) if state.is_simultaneous_node() else [state.current_player()]
                for player in players:
                    legal = state.legal_actions(player)
                    fresh = [ascii_text(state.action_to_string(player, a)) for a in legal]
                    names, lines = namer.lines(state, player, legal)
                    assert names == fresh if len(set(fresh)) == len(fresh) else len(set(names)) == len(names)
                    assert lines == [f"{a} -> {n}" for a, n in zip(legal, names, strict=True)]
                if state.is_simultaneous_node():
                    state.apply_actions([rng.choice(state.legal_actions(p)) for p in players])
                else:
                    state.apply_action(rng.choice(state.legal_actions()))
                plies += 1


def test_position_dependent_names_are_not_cached() -> None:
    game = load_game("chess", {})
    namer = ActionNamer(2, static=False)
    state = game.new_initial_state()
    knight = next(a for a in state.legal_actions() if state.action_to_string(a) == "Nc3")
    assert namer.name(state, 1, knight) == "Nc3"
