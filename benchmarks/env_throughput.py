"""Env steps/s of raw ALE (RAM observations) against each LLM observation mode, measured in the same run.

Prints JSON: steps/s per game and mode, and each mode's ratio to raw ``ALE/<Game>-v5``. The same seeded random
action sequence drives every env; envs are made with ``gym.make`` (wrappers included) as a user would.

    python benchmarks/env_throughput.py [--steps 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import ale_py
import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the ids)

gym.register_envs(ale_py)

GAMES = ("Breakout", "Pong")
MODES = ("text", "ascii", "vision")
GOALS = {"text": 0.9, "ascii": 0.9, "vision": 0.5}


def steps_per_second(env_id: str, steps: int, actions: np.ndarray, **kwargs: object) -> float:
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions[:steps]:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="steps per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per env (interleaved; best is kept)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    report: dict[str, object] = {"steps": args.steps, "repeats": args.repeats, "python": platform.python_version()}
    for game in GAMES:
        n_actions = gym.make(f"ALE/{game}-v5").action_space.n
        actions = rng.integers(n_actions, size=args.steps)
        ids = {"raw": (f"ALE/{game}-v5", {"obs_type": "ram"})} | {m: (f"LLM{game}-{m}-v0", {}) for m in MODES}
        best = {name: 0.0 for name in ids}
        # Interleave the envs so drift in machine load hits all of them alike; keep each one's best.
        for _ in range(args.repeats):
            for name, (env_id, kwargs) in ids.items():
                best[name] = max(best[name], steps_per_second(env_id, args.steps, actions, **kwargs))
        report[game] = {
            "steps_per_second": {k: round(v, 1) for k, v in best.items()},
            "ratio_to_raw": {m: round(best[m] / best["raw"], 3) for m in MODES},
            "goal": GOALS,
            "meets_goal": {m: best[m] / best["raw"] >= GOALS[m] for m in MODES},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
