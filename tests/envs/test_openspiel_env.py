"""The OpenSpiel Gymnasium env: every game plays to the end, task ids and seeds fix everything, the text and info
say what they must, invalid actions are handled, snapshots replay exactly."""

from __future__ import annotations

import random
import re
import string

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llm_gym
from llm_gym.agents.baselines import RandomPolicy
from llm_gym.envs.openspiel.catalog import GAME_NAMES, GAMES, decode_task_id, task_id_of
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.errors import EnvInputError

PRINTABLE = set(string.printable)


def play(env: OpenSpielEnv, seed: int, rng: random.Random, options: dict | None = None, limit: int = 10_000):
    """Random legal play to the end; returns (observations, rewards, final info, terminated, steps)."""
    obs, info = env.reset(seed=seed, options=options)
    observations, rewards = [obs], []
    for steps in range(1, limit + 1):
        obs, reward, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info, terminated, steps
    raise AssertionError(f"{env.game_spec.name} did not end within {limit} steps")


@pytest.mark.parametrize("game", GAME_NAMES)
def test_every_game_plays_to_the_end_with_consistent_text_and_info(game: str) -> None:
    env = gym.make(f"OpenSpiel-{game}-v0").unwrapped
    obs, info = env.reset(seed=3)
    spec = env.game_spec
    assert obs.startswith(spec.title) and "Legal actions (id -> name):" in obs
    assert env.observation_space.contains(obs)
    assert spec.title in env.instructions and "Rules:" in env.instructions
    assert len(info["legal_actions"]) == len(info["action_names"]) > 0
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (env.action_space.n,)
    assert set(np.flatnonzero(info["action_mask"])) == set(info["legal_actions"])
    for action, name in zip(info["legal_actions"], info["action_names"], strict=True):
        assert f"\n{action} -> {name}" in obs
    observations, rewards, final, terminated, steps = play(env, 3, random.Random(0))
    assert steps <= spec.max_turns
    assert all(set(o) <= PRINTABLE and env.observation_space.contains(o) for o in observations)
    assert sum(rewards) == pytest.approx(final["game_return"])
    assert 0.0 <= final["score"] <= 1.0 and final["success"] == (final["score"] > 0.5)
    if terminated:
        assert "Game over." in observations[-1] and final["legal_actions"] == []
        assert final["game_return"] == final["returns"][final["player"]]


@pytest.mark.parametrize("spec", GAMES, ids=lambda s: s.name)
def test_hardest_variant_passes_the_checker(spec) -> None:
    # The registered ids are checked with their default (variant 0) by tests/envs/test_envs.py; here the last one.
    variant = len(spec.variants) - 1
    # bridge's task variants end in a double-dummy solve, seconds per deal: the checker plays card play instead
    params = {"use_double_dummy_result": False} if spec.name == "bridge" else None
    check_env(OpenSpielEnv(spec.name, config=variant, params=params), skip_render_check=True)


def trajectory(env: OpenSpielEnv, seed: int, task_id: int, steps: int = 30) -> list[tuple[str, float]]:
    """Up to ``steps`` random legal moves (seeded), starting a new game with the same task when one ends."""
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    out = [(obs, 0.0)]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
        out.append((obs, reward))
        if terminated or truncated:
            obs, info = env.reset(options={"task_id": task_id})
            out.append((obs, 0.0))
    return out


@pytest.mark.parametrize("spec", GAMES, ids=lambda s: s.name)
def test_same_task_id_and_seed_give_the_same_game_every_time(spec) -> None:
    task_id = task_id_of(spec.name, min(1, len(spec.variants) - 1))
    # bridge: card play (its task variants end in a double-dummy solve, seconds per deal)
    params = {"use_double_dummy_result": False} if spec.name == "bridge" else {}
    game = "bridge" if params else None
    env_a, env_b = OpenSpielEnv(game, params=params), OpenSpielEnv(game, params=params)
    first = trajectory(env_a, 11, task_id)
    assert env_a.game_spec is spec and env_a.params == {**decode_task_id(task_id).params, **params}
    assert trajectory(env_b, 11, task_id) == first
    assert trajectory(env_a, 11, task_id) == first  # and again on a used env


def test_opponents_do_not_change_the_chance_outcomes() -> None:
    # Backgammon's opening roll and Leduc's deal (the first history entries) come from the seed alone, whoever sits
    # in the other seat.
    for game, chance_moves in (("backgammon", 1), ("leduc_poker", 2)):
        first = [
            OpenSpielEnv(game, opponent=o, seat=0).reset(seed=4)[1]["history"][:chance_moves]
            for o in ("random", "mcts")
        ]
        assert first[0] == first[1]


def test_seat_comes_from_the_seed_or_the_option() -> None:
    env = OpenSpielEnv("tic_tac_toe")
    seats = {env.reset(seed=s)[1]["player"] for s in range(12)}
    assert seats == {0, 1}
    assert all(env.reset(seed=s, options={"seat": 1})[1]["player"] == 1 for s in range(3))
    assert "you are player 1 (o) of 2" in env.reset(seed=0, options={"seat": 1})[0]
    with pytest.raises(ValueError, match="seats 0..1"):
        env.reset(seed=0, options={"seat": 2})


def test_per_game_env_refuses_another_games_task_id() -> None:
    env = OpenSpielEnv("hex")
    env.reset(seed=0, options={"task_id": task_id_of("hex", 2)})
    assert env.params["board_size"] == 9 and "board_size=9" in env.instructions
    with pytest.raises(ValueError, match="OpenSpiel-v0"):
        env.reset(seed=0, options={"task_id": task_id_of("chess")})


def test_task_driven_env_switches_game_and_instructions() -> None:
    env = gym.make("OpenSpiel-v0").unwrapped
    obs, info = env.reset(seed=0, options={"task_id": task_id_of("kuhn_poker")})
    assert info["game"] == "kuhn_poker" and "Kuhn Poker" in env.instructions and "Your card:" in obs
    obs, info = env.reset(seed=0, options={"task_id": task_id_of("chess")})
    assert info["game"] == "chess" and "Chess" in env.instructions and "FEN:" in obs
    assert max(info["legal_actions"]) < env.action_space.n


def test_illegal_actions_are_penalised_counted_and_capped() -> None:
    env = OpenSpielEnv("tic_tac_toe", seat=0, max_invalid_actions=1)
    env.reset(seed=0)
    _, _, _, _, info = env.step(4)
    occupied = next(a for a in range(env.action_space.n) if a not in info["legal_actions"])
    obs, reward, terminated, truncated, info = env.step(occupied)
    assert info["invalid_action"] and info["invalid_actions"] == 1 and reward == pytest.approx(-0.1)
    assert info["turn"] == 2 and not terminated  # a random legal move was played instead
    # Not an action id at all (a caller's bug, not a move): refused, nothing counted, the game goes on.
    for bad in ("not a number", -5, env.action_space.n, 1.5, None):
        with pytest.raises(EnvInputError, match=r"an int in 0\.\.8"):
            env.step(bad)
    occupied = next(a for a in range(env.action_space.n) if a not in info["legal_actions"])
    obs, reward, terminated, truncated, info = env.step(occupied)
    assert terminated and info["forfeit"] and info["score"] == 0.0 and "forfeited" in obs
    assert info["game_return"] == -1.0 and info["invalid_actions"] == 2
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)


def test_episodes_are_truncated_at_max_turns() -> None:
    env = OpenSpielEnv("chess", max_turns=3)
    _, rewards, info, terminated, steps = play(env, 0, random.Random(0))
    assert (steps, terminated) == (3, False) and info["score"] == 0.5


def test_text_actions_wrapper_parses_names() -> None:
    env = llm_gym.TextActions(OpenSpielEnv("tic_tac_toe", seat=0))
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step("I will play x(1,1).")
    assert info["parsed_action"] == 4 and not info["invalid_action"]
    _, _, _, _, info = env.step("no idea")
    assert info["invalid_action"] and info["invalid_actions"] == 1


def test_simultaneous_moves_are_chosen_without_seeing_the_learner() -> None:
    # The opponent's first bid is the same whatever the learner bids: it chose from the same state, blind.
    bids = []
    for learner_bid in (0, 5):
        env = OpenSpielEnv("goofspiel", seat=0)
        env.reset(seed=9)
        _, _, _, _, info = env.step(learner_bid)
        history = info["history"]
        bids.append(history[history.index(learner_bid, 1) + 1])
    assert bids[0] == bids[1]


def test_mcts_opponent_beats_a_random_learner() -> None:
    env = OpenSpielEnv("tic_tac_toe", opponent="mcts", mcts={"simulations": 200})
    scores = [play(env, seed, random.Random(seed))[2]["score"] for seed in range(6)]
    assert np.mean(scores) < 0.25


def test_policy_opponents_see_their_own_seat() -> None:
    seen: list[str] = []

    def opponent(observation: str, info: dict) -> int:
        seen.append(observation)
        return 999 if len(seen) == 1 else info["legal_actions"][0]  # the first answer is illegal

    env = OpenSpielEnv("leduc_poker", opponent=opponent, seat=0)
    _, _, info, _, _ = play(env, 2, random.Random(0))
    assert seen and all("you are player 1 of 2" in s for s in seen)
    assert info["opponent_invalid_actions"] == 1
    # A batched llm-gym Policy works the same way (self-play against a frozen policy).
    env = OpenSpielEnv("hearts", opponent=RandomPolicy(0))
    play(env, 0, random.Random(0))


@pytest.mark.parametrize(
    ("game", "opponent"),
    [("backgammon", "random"), ("leduc_poker", "random"), ("goofspiel", "random"), ("hearts", "random"),
     ("connect_four", "mcts")],
)  # fmt: skip
def test_clone_and_restore_replay_exactly(game: str, opponent: str) -> None:
    env = OpenSpielEnv(game, opponent=opponent, mcts={"simulations": 20})
    _, info = env.reset(seed=1)
    snapshot = env.clone_state()
    rng, actions, first = random.Random(3), [], []
    for _ in range(6):
        actions.append(rng.choice(info["legal_actions"]))
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        first.append((obs, reward, terminated))
        if terminated or truncated:
            break
    env.restore_state(snapshot)
    assert [env.step(a)[:3] for a in actions] == first


def test_observations_show_recent_moves_in_perfect_information_games() -> None:
    env = OpenSpielEnv("tic_tac_toe", seat=1)
    obs, _ = env.reset(seed=0)
    assert re.search(r"Since your last turn: player 0 \(x\) played x\(\d,\d\)\.", obs)
    env = OpenSpielEnv("phantom_ttt", seat=1)
    obs, _ = env.reset(seed=0)
    assert "Since your last turn" not in obs  # the opponent's move is hidden in phantom tic-tac-toe


@pytest.mark.parametrize(
    ("mcts", "said"),
    [
        ({"simulations": "abc"}, "mcts: simulations='abc' is not a valid int"),
        ({"uct_c": "nan"}, "mcts: uct_c=nan is not a finite number"),
        ({"simulation": 3}, "mcts: unknown key 'simulation' for MCTSConfig; did you mean simulations?"),
    ],
)
def test_mcts_settings_are_checked_like_any_config(mcts: dict, said: str) -> None:
    """``mcts={"simulations": "abc"}`` surfaced a raw TypeError ("'<' not supported between 'str' and 'int'")."""
    from llm_gym.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        OpenSpielEnv("tic_tac_toe", opponent="mcts", mcts=mcts)
    assert said in str(refused.value) and "\n" not in str(refused.value)
