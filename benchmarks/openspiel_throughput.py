"""OpenSpiel text env throughput against a raw pyspiel random-play loop in the same process, and MCTS move time.

Prints JSON. For each game the raw loop (``pyspiel`` only: random legal moves, chance sampled by inverse CDF, the same
``random.Random`` draws the env uses) and the env loop (``OpenSpielEnv``: the learner plays random legal actions
from ``info``, a random opponent the other seats, every step builds the text observation, names and mask) run in
alternating slices of ``--seconds``; each rate is the median over ``--rounds`` slices, so machine load hits both.

Units: a *ply* is one player's move (chance outcomes excluded). An env step is one learner decision and plays the
opponents' plies too, so the like-for-like ratio is ``ratio_plies = env plies/s / raw plies/s`` (the goal is >= 0.5);
``ratio_steps = env steps/s / raw plies/s`` is the stricter per-call number.

Decoding: ``decode_task_id`` (what every ``OpenSpiel-v0`` reset with a task id calls) in both profiles, against a
reference in the same run: the decoder as it was before the affinetes variants (a fresh parameter dict and Task per
call), ``ratio_decode = new ns / reference ns`` (the goal is <= 1).

MCTS: the time of one move of the MCTS opponent at the catalog's budget (simulations, rollout cap,
determinizations) on positions reached by a few random moves, median over ``--positions``.

    python benchmarks/openspiel_throughput.py                    # all default games, ~1-2 minutes
    python benchmarks/openspiel_throughput.py --games tic_tac_toe chess --seconds 0.5 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from typing import Any

from llm_gym.envs.openspiel.catalog import GAMES, TASK_STRIDE, Task, decode_task_id, game_spec
from llm_gym.envs.openspiel.core import load_game, sample_chance
from llm_gym.envs.openspiel.env import OpenSpielEnv
from llm_gym.envs.openspiel.opponents import MCTSConfig, MCTSOpponent

THROUGHPUT_GAMES = [
    "tic_tac_toe", "connect_four", "kuhn_poker", "leduc_poker", "goofspiel", "othello", "go", "backgammon",
    "hearts", "bridge", "gin_rummy", "chess",
]  # fmt: skip
# What the registered per-game ids play where it differs from the task variant 0 (bridge: card play, not the
# double-dummy-scored bidding of the task ids, seconds per deal).
REGISTERED_PARAMS = {"bridge": {"use_double_dummy_result": False}}
MCTS_GAMES = [
    "tic_tac_toe", "connect_four", "hex", "go", "othello", "chess", "backgammon", "leduc_poker", "liars_dice",
    "goofspiel", "phantom_ttt", "hearts", "bridge",
]  # fmt: skip


def raw_plies_per_second(game: Any, seconds: float, rng: random.Random) -> float:
    """Random legal play with pyspiel alone; plies per second over whole games."""
    plies, players = 0, game.num_players()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                state.apply_action(sample_chance(state, rng))
            elif state.is_simultaneous_node():
                joint = []
                for p in range(players):
                    legal = state.legal_actions(p)
                    joint.append(legal[rng.randrange(len(legal))])
                state.apply_actions(joint)
                plies += players
            else:
                legal = state.legal_actions()
                state.apply_action(legal[rng.randrange(len(legal))])
                plies += 1
    return plies / (time.perf_counter() - start)


def env_rates(env: OpenSpielEnv, seconds: float, rng: random.Random) -> tuple[float, float]:
    """(env steps per second, plies per second) with a random legal learner; plies include the opponents'."""
    steps = plies = 0
    _, info = env.reset()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        legal = info["legal_actions"]
        _, _, terminated, truncated, info = env.step(legal[rng.randrange(len(legal))])
        steps += 1
        if terminated or truncated:
            plies += sum(env._decisions)  # every seat's decisions in the finished game
            _, info = env.reset()
    plies += sum(env._decisions)
    elapsed = time.perf_counter() - start
    return steps / elapsed, plies / elapsed


def throughput(name: str, seconds: float, rounds: int) -> dict[str, Any]:
    env = OpenSpielEnv(name, seat=0, params=REGISTERED_PARAMS.get(name))
    env.reset(seed=0)
    game = load_game(name, env.params)
    rng = random.Random(0)
    raw, steps, plies = [], [], []
    for _ in range(rounds):
        raw.append(raw_plies_per_second(game, seconds, rng))
        step_rate, ply_rate = env_rates(env, seconds, rng)
        steps.append(step_rate)
        plies.append(ply_rate)
    raw_rate, step_rate, ply_rate = statistics.median(raw), statistics.median(steps), statistics.median(plies)
    return {
        "game": name,
        "params": env.params,
        "raw_plies_per_s": round(raw_rate),
        "env_steps_per_s": round(step_rate),
        "env_plies_per_s": round(ply_rate),
        "ratio_plies": round(ply_rate / raw_rate, 3),
        "ratio_steps": round(step_rate / raw_rate, 3),
    }


def mcts_move_time(name: str, positions: int) -> dict[str, Any]:
    spec = game_spec(name)
    game = load_game(name, {**spec.variants[0], **REGISTERED_PARAMS.get(name, {})})
    config = MCTSConfig().for_game(spec)
    bot = MCTSOpponent(game, spec, MCTSConfig(), seed=0)
    rng = random.Random(1)
    times = []
    while len(times) < positions:
        state = game.new_initial_state()
        for _ in range(rng.randrange(6)):  # a few random moves, so positions differ
            if state.is_terminal():
                break
            if state.is_simultaneous_node():
                state.apply_actions([rng.choice(state.legal_actions(p)) for p in range(game.num_players())])
            else:
                state.apply_action(
                    rng.choice(state.legal_actions()) if not state.is_chance_node() else sample_chance(state, rng)
                )
        while state.is_chance_node():
            state.apply_action(sample_chance(state, rng))
        if state.is_terminal():
            continue
        player = 0 if state.is_simultaneous_node() else state.current_player()
        start = time.perf_counter()
        bot.act(state, player)
        times.append(time.perf_counter() - start)
    return {
        "game": name,
        "simulations": config.simulations,
        "rollout_length": config.rollout_length or None,
        "determinizations": bot.determinizations,
        "median_ms": round(1000 * statistics.median(times), 1),
        "max_ms": round(1000 * max(times), 1),
    }


def reference_decode(task_id: int) -> Task:
    """The decoder before this project followed affinetes' variants: a new dict and Task on every call."""
    index, config = divmod(int(task_id), TASK_STRIDE)
    if task_id < 0 or index >= len(GAMES):
        raise ValueError(task_id)
    game = GAMES[index]
    variant = config % len(game.variants)
    return Task(task_id, game, variant, dict(game.variants[variant]))


def decode_cost(calls: int, rounds: int) -> dict[str, Any]:
    """ns per decode over the same random task ids, alternating implementations, median of ``rounds``."""
    rng = random.Random(0)
    ids = [rng.randrange(22 * TASK_STRIDE) for _ in range(calls)]
    decoders = {
        "reference": reference_decode,
        "default": decode_task_id,
        "affinetes": lambda t: decode_task_id(t, "affinetes"),
    }
    for decode in decoders.values():  # warm the caches
        for task_id in ids[:1000]:
            decode(task_id)
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(rounds):
        for name, decode in decoders.items():
            start = time.perf_counter()
            for task_id in ids:
                decode(task_id)
            times[name].append((time.perf_counter() - start) / calls * 1e9)
    ns = {name: statistics.median(t) for name, t in times.items()}
    return {
        "calls": calls,
        "reference_ns": round(ns["reference"]),
        "default_ns": round(ns["default"]),
        "affinetes_ns": round(ns["affinetes"]),
        "ratio_decode": round(ns["default"] / ns["reference"], 3),
        "ratio_decode_affinetes": round(ns["affinetes"] / ns["reference"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="*", default=THROUGHPUT_GAMES, help="games for the throughput part")
    parser.add_argument("--mcts-games", nargs="*", default=MCTS_GAMES, help="games for the MCTS move time")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timed slice")
    parser.add_argument("--rounds", type=int, default=3, help="alternating raw/env slices per game")
    parser.add_argument("--positions", type=int, default=5, help="positions per game for the MCTS move time")
    parser.add_argument("--decode-calls", type=int, default=100_000, help="task ids decoded per timed round")
    args = parser.parse_args()
    rows = [throughput(name, args.seconds, args.rounds) for name in args.games]
    result = {
        "benchmark": "openspiel_throughput",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seconds_per_slice": args.seconds,
        "rounds": args.rounds,
        "decode": decode_cost(args.decode_calls, args.rounds),
        "throughput": rows,
        "median_ratio_plies": statistics.median(r["ratio_plies"] for r in rows) if rows else None,
        "mcts_move_time": [mcts_move_time(name, args.positions) for name in args.mcts_games],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
