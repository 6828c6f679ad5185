"""Every move in every text observation is attributed to the seat that made it, for every seat.

Real OpenSpiel games are played (random legal moves) through the Gymnasium env (the learner in each seat, a policy
opponent recording what it is shown) and the PettingZoo env (every seat); after each move the text of each seat is
checked against an oracle built here from the state's own ``full_history()``:

* Kuhn, Leduc and Liar's Dice, whose text lists the betting: the list must be ``player P: move`` in the history's
  order, ``(you)`` on the reader's own moves;
* perfect-information games (goofspiel's simultaneous rounds included): ``Since your last turn`` must hold exactly
  the other seats' moves and the chance outcomes after the reader's own last move (after the start of its last
  round, for a simultaneous round: the other bids of that round were revealed with it);
* imperfect-information games never get that line (a move may be hidden), and a simultaneous move a seat could not
  observe (goofspiel with ``imp_info``) never reaches its text.
"""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pytest

from llm_gym.envs.openspiel.catalog import GAMES, game_spec
from llm_gym.envs.openspiel.core import is_perfect_information, load_game
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.envs.openspiel.pettingzoo_env import OpenSpielAECEnv
from llm_gym.envs.openspiel.text import ascii_text, seat_name

_BETTING_LINE = {
    "kuhn_poker": "Actions so far, oldest first: ",
    "liars_dice": "Bids so far, oldest first (quantity-face): ",
}


def players_moves(state: Any) -> list[tuple[int, str]]:
    """(seat, OpenSpiel's name of the move) of every non-chance move so far, oldest first, replayed from scratch so
    each move is named in the state it was played in."""
    game = state.get_game()
    replay, moves = game.new_initial_state(), []
    entries = [(m.player, m.action) for m in state.full_history()]
    i = 0
    while i < len(entries):
        if replay.is_simultaneous_node():
            joint = [a for _, a in entries[i : i + game.num_players()]]
            moves += [(p, replay.action_to_string(p, a)) for p, a in enumerate(joint) if replay.legal_actions(p)]
            replay.apply_actions(joint)
            i += game.num_players()
            continue
        player, action = entries[i]
        if player >= 0:
            moves.append((player, replay.action_to_string(player, action)))
        replay.apply_action(action)
        i += 1
    return moves


def expected_betting(moves: list[tuple[int, str]], seat: int) -> str:
    return ", ".join(f"player {p}{' (you)' if p == seat else ''}: {name}" for p, name in moves)


def expected_recent(state: Any, seat: int) -> list[str]:
    """The others' moves and chance outcomes since ``seat`` last moved (its last simultaneous round: since it
    began), each named as the log names it, from a replay of the full history."""
    game, spec = state.get_game(), game_spec(state.get_game().get_type().short_name)
    replay, log, since = game.new_initial_state(), [], 0
    entries = [(m.player, m.action) for m in state.full_history()]
    i = 0
    while i < len(entries):
        if replay.is_simultaneous_node():
            joint = [a for _, a in entries[i : i + game.num_players()]]
            acting = [p for p in range(game.num_players()) if replay.legal_actions(p)]
            if seat in acting:
                since = len(log)
            log += [
                (p, f"{seat_name(spec, p)} played {ascii_text(replay.action_to_string(p, joint[p]))}") for p in acting
            ]
            replay.apply_actions(joint)
            i += game.num_players()
            continue
        player, action = entries[i]
        if player == seat:
            since = len(log) + 1
        prefix = "chance: " if player < 0 else f"{seat_name(spec, player)} played "
        log.append((player, prefix + ascii_text(replay.action_to_string(player, action))))
        replay.apply_action(action)
        i += 1
    return [text for p, text in log[since:] if p != seat]


def check_text(state: Any, seat: int, text: str) -> None:
    """Assert ``text`` (what ``seat`` is shown in ``state``) attributes every move it mentions correctly."""
    name = state.get_game().get_type().short_name
    if name in _BETTING_LINE:
        line = next(line for line in text.splitlines() if line.startswith(_BETTING_LINE[name]))
        moves = players_moves(state)
        assert line == _BETTING_LINE[name] + (expected_betting(moves, seat) or "none yet"), (seat, text)
    elif name == "leduc_poker":
        moves = players_moves(state)
        rounds = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Bets in round ")]
        assert len(rounds) == 2, text
        # Round 2 starts after the public card, the last chance outcome of a hand that reached it.
        history = [(m.player, m.action) for m in state.full_history()]
        chance_at = [i for i, (p, _) in enumerate(history) if p < 0]
        public = chance_at[-1] if len(chance_at) > state.get_game().num_players() else len(history)
        first = sum(1 for p, _ in history[:public] if p >= 0)
        expected = [expected_betting(moves[:first], seat) or "none", expected_betting(moves[first:], seat) or "none"]
        assert rounds == expected, (seat, text)
    recent = re.search(r"^Since your last turn: (.*)\.$", text, re.MULTILINE)
    if is_perfect_information(state.get_game()):
        assert (recent.group(1).split("; ") if recent else []) == expected_recent(state, seat), (seat, text)
    else:
        assert recent is None, text


# -- the Gymnasium env: the learner in each seat, and what a policy opponent is shown --------------------------------

ATTRIBUTION_CASES = [
    ("kuhn_poker", None),
    ("kuhn_poker", {"players": 3}),
    ("leduc_poker", None),
    ("leduc_poker", {"players": 3}),  # a folded seat is skipped in later betting
    ("liars_dice", {"numdice": 2}),
    ("goofspiel", None),  # simultaneous rounds
    ("goofspiel", {"players": 3, "num_cards": 5}),
    ("tic_tac_toe", None),
    ("backgammon", {"hyper_backgammon": True}),  # chance every turn, two moves in a row by one seat
    ("dots_and_boxes", None),  # a completed box moves again
]


def play_gym(game: str, params: dict | None, seat: int, seed: int, opponent_seen: list) -> None:
    """Random play with the learner in ``seat``; every learner observation is checked; the (state, seat, text)
    each policy opponent is shown are kept in ``opponent_seen``."""
    env_holder: list[OpenSpielEnv] = []

    def opponent(observation: str, info: dict) -> int:
        opponent_seen.append((env_holder[0].state.clone(), info["player"], observation))
        return random.Random(len(opponent_seen)).choice(info["legal_actions"])

    env = OpenSpielEnv(game, params=params, seat=seat, opponent=opponent)
    env_holder.append(env)
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    check_text(env.state, seat, obs)
    for _ in range(40):
        obs, _, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
        check_text(env.state, seat, obs)
        if terminated or truncated:
            break


@pytest.mark.parametrize(("game", "params"), ATTRIBUTION_CASES)
def test_gym_learner_and_policy_opponents_are_told_who_made_each_move(game: str, params: dict | None) -> None:
    players = load_game(game, params or {}).num_players()
    for seat in range(players):
        seen: list = []
        for seed in range(3):
            play_gym(game, params, seat, seed, seen)
        assert seen, "the opponents must have been asked"
        assert {player for _, player, _ in seen} == set(range(players)) - {seat}
        for state, player, text in seen:
            check_text(state, player, text)


def test_kuhn_poker_second_pass_is_player_ones() -> None:
    # The reported case: player 0 passed, then player 1 passed; the old text read "from player 0: Pass, Pass".
    env = OpenSpielEnv("kuhn_poker", seat=0)
    env.reset(seed=3)
    obs, *_ = env.step(0)
    assert "Actions so far, oldest first: player 0 (you): Pass, player 1: Pass" in obs
    env = OpenSpielEnv("kuhn_poker", seat=1, opponent=lambda obs, info: 0)  # player 0 passes
    obs, _ = env.reset(seed=3)
    assert "Actions so far, oldest first: player 0: Pass\n" in obs
    obs, *_ = env.step(1)  # player 1 bets, player 0 passes (folds)
    assert "Actions so far, oldest first: player 0: Pass, player 1 (you): Bet, player 0: Pass" in obs


def test_goofspiel_second_seat_is_told_the_first_seats_bid() -> None:
    env = OpenSpielEnv("goofspiel", seat=1, opponent=lambda obs, info: info["legal_actions"][-1])
    env.reset(seed=0)
    obs, *_ = env.step(0)  # bid 1; player 0 bids its highest card
    assert "player 0 (P0) played [P0]Bid: 8" in obs


# -- the PettingZoo env: every seat reads its text after every move -------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [g for g in GAMES if g.name not in ("bridge", "solitaire", "2048")],  # bridge: a double-dummy solve per deal
    ids=lambda s: s.name,
)
def test_pettingzoo_every_seat_is_told_who_made_each_move(spec) -> None:
    params = {"hyper_backgammon": True} if spec.name == "backgammon" else None
    env = OpenSpielAECEnv(spec.name, params=params)
    env.reset(seed=1)
    rng = random.Random(1)
    for _ in range(40):
        if env.state.is_terminal():
            break
        for agent in env.agents:
            check_text(env.state, int(agent.split("_")[1]), env.observe(agent)["text"])
        mask = env.observe(env.agent_selection)["action_mask"]
        env.step(rng.choice(np.flatnonzero(mask).tolist()))


def test_pettingzoo_bridge_card_play_never_logs_hidden_moves() -> None:
    env = OpenSpielAECEnv("bridge", params={"use_double_dummy_result": False})
    env.reset(seed=0)
    rng = random.Random(0)
    for _ in range(60):
        for agent in env.agents:
            check_text(env.state, int(agent.split("_")[1]), env.observe(agent)["text"])
        env.step(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]).tolist()))


# -- hidden simultaneous moves stay hidden -------------------------------------------------------------------------


def test_hidden_goofspiel_bids_never_reach_the_other_seat() -> None:
    # With imp_info the bids are private: two games that differ only in player 1's first bid (player 0 wins the
    # round either way) must read the same to player 0, in both envs.
    params = {"imp_info": True, "num_cards": 4, "points_order": "descending"}
    texts = []
    for their_bid in (0, 1):
        env = OpenSpielEnv("goofspiel", params=params, seat=0, opponent=lambda obs, info, b=their_bid: b)
        env.reset(seed=0)
        obs, *_ = env.step(3)  # player 0 bids 4
        assert "Since your last turn" not in obs
        texts.append(obs)
        aec = OpenSpielAECEnv("goofspiel", params=params)
        aec.reset(seed=0)
        aec.step(3)
        aec.step(their_bid)
        texts.append(aec.observe("player_0")["text"])
    assert texts[0] == texts[2] and texts[1] == texts[3]


# -- trick-taking games: OpenSpiel's own text puts each card under (or after) the seat that played it ---------------


def card_plays(state: Any, count: int) -> list[tuple[int, str]]:
    """The last ``count`` player moves (the cards played so far: passing, bidding and discards come before them)."""
    moves = [(m.player, m.action) for m in state.full_history() if m.player >= 0]
    return [(p, ascii_text(state.action_to_string(p, a))) for p, a in moves[len(moves) - count :]] if count else []


@pytest.mark.parametrize("game", ["hearts", "euchre"])
def test_trick_columns_are_the_seats_that_played_the_cards(game: str) -> None:
    # "N  E  S  W  N  E  S" then one row per trick, each card in its player's three-character column.
    env = OpenSpielAECEnv(game)
    env.reset(seed=2)
    rng = random.Random(2)
    checked = 0
    for _ in range(120):
        if env.state.is_terminal():
            break
        for agent in env.agents:
            text = env.observe(agent)["text"]
            lines = text.splitlines()
            header = next((i for i, line in enumerate(lines) if line.startswith("N  E  S  W")), len(lines))
            rows = []  # no trick table before the first card is played (bidding, passing)
            for line in lines[header + 1 :]:
                if not line.strip():
                    break
                rows += [(k // 3 % 4, card) for k in range(0, len(line), 3) if (card := line[k : k + 2].strip())]
            assert rows == card_plays(env.state, len(rows)), text
            checked += len(rows)
        env.step(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]).tolist()))
    assert checked > 0


def test_bridge_tricks_name_the_hand_each_card_came_from() -> None:
    # "Trick 1. East: DA South: D5 ...": the seat named is the hand; declarer plays dummy's cards, so a card named
    # for the dummy was chosen by its partner.
    env = OpenSpielAECEnv("bridge", params={"use_double_dummy_result": False})
    env.reset(seed=0)
    rng = random.Random(0)
    seats = {"North": 0, "East": 1, "South": 2, "West": 3}
    checked = 0
    while not env.state.is_terminal():
        text = env.observe("player_0")["text"]
        plays = [(seats[s], c) for s, c in re.findall(r"(North|East|South|West): (\w\w\w?)", text)]
        dummy = re.search(r"Dummy is (\w+)", text)
        chosen = card_plays(env.state, len(plays))
        for (hand, card), (player, name) in zip(plays, chosen, strict=True):
            assert card == name and (player == hand or (hand == seats[dummy.group(1)] and player == (hand + 2) % 4))
        checked += len(plays)
        mask = env.observe(env.agent_selection)["action_mask"]
        legal = np.flatnonzero(mask).tolist()
        env.step(52 if 52 in legal and rng.random() < 0.8 else rng.choice(legal))  # pass often: reach card play
    assert checked > 0
