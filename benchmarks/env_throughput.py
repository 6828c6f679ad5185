"""Env steps/s of raw ALE (RAM observations) against each LLM observation mode, measured in the same run.

Prints JSON: steps/s per game and mode, and each mode's ratio to raw ``ALE/<Game>-v5``. The same seeded random
action sequence drives every env; envs are made with ``gym.make`` (wrappers included) as a user would. The envs
run in short interleaved rounds and each ratio is the median of per-round ratios, so load from other processes
hits raw and modes alike.

    python benchmarks/env_throughput.py [--steps 500] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import ale_py
import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the ids)

gym.register_envs(ale_py)

GAMES = ("Breakout", "Pong")
MODES = ("text", "ascii", "vision")
GOALS = {"text": 0.9, "ascii": 0.9, "vision": 0.5}


def timed_steps(env: gym.Env, actions: np.ndarray) -> float:
    """Seconds to take ``actions`` (resetting when an episode ends)."""
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per env per round")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    report: dict[str, object] = {
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "python": platform.python_version(),
    }
    for game in GAMES:
        ids = {"raw": (f"ALE/{game}-v5", {"obs_type": "ram"})} | {m: (f"LLM{game}-{m}-v0", {}) for m in MODES}
        envs = {name: gym.make(env_id, **kwargs) for name, (env_id, kwargs) in ids.items()}
        for env in envs.values():
            env.reset(seed=0)
        n_actions = envs["raw"].action_space.n
        seconds: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(args.rounds):
            actions = rng.integers(n_actions, size=args.steps)
            for name in rng.permutation(list(envs)):
                seconds[name].append(timed_steps(envs[name], actions))
        for env in envs.values():
            env.close()
        ratios = {m: statistics.median(r / s for r, s in zip(seconds["raw"], seconds[m], strict=True)) for m in MODES}
        report[game] = {
            "steps_per_second": {k: round(args.steps / statistics.median(v), 1) for k, v in seconds.items()},
            "ratio_to_raw": {m: round(r, 3) for m, r in ratios.items()},
            "goal": GOALS,
            "meets_goal": {m: ratios[m] >= GOALS[m] for m in MODES},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
