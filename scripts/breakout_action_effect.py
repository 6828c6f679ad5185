"""How much of Breakout's shaped reward does one decision control? The tracking signal PPO could get, before any critic.

`breakout_advantage_by_side.py` measures the share of a LEFT/RIGHT move's *advantage* variance that its direction
(towards the ball or away) explains in a checkpoint's play: 0.35-2.9%. This script asks the env itself, with no
model and no critic: from states a uniformly random policy visits (the ball in play, more than 8 px from the
paddle's centre), it snapshots the emulator (RNG and sticky-action state included, so every branch sees the same
random numbers) and tries each action, either held or followed by the same uniformly random actions in every
branch (a policy that has learnt nothing yet, as at the start of training). Over states and actions it reports, for
the discounted shaped return of ``k`` steps and for a constant-critic GAE advantage ``sum_j (gamma lambda)^j r_j``:

* the mean of the move towards the ball, of the move away, and of NOOP;
* ``action_share``: the part of the return's variance (over states and uniformly chosen actions) that lies between
  the actions of one state, the part a policy gradient with a constant baseline can learn from, and
  ``direction_share``: the same for the LEFT and RIGHT branches only (what the advantage script reports, here
  without a critic's errors).

    python scripts/breakout_action_effect.py [--states 400] [--seed 0] [--shaping 10] [--horizons 1,2,4,8,16,32]
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the envs)

DEADBAND = 8
"""Offsets within this many px of the paddle's centre have no "towards" (as in value_decodability.SIDE_DEADBAND)."""


def branch_rewards(env, snapshot, actions: list[int]) -> np.ndarray:  # noqa: ANN001  (the unwrapped env)
    """Shaped reward of each of ``actions`` taken in turn from ``snapshot``; zeros after an episode ends."""
    env.restore_state(snapshot)
    rewards = np.zeros(len(actions))
    for j, action in enumerate(actions):
        _, rewards[j], terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return rewards


FOLLOWS = ("hold", "then_random")
"""After the first action: hold it for the whole horizon, or take the same uniformly random actions in every branch
(a single decision's effect under a policy that has not learnt anything, as at the start of training)."""

LAMBDAS = (0.0, 0.5, 0.8, 0.95)


def record(states: int, seed: int, shaping: float, length: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Visit ``states`` off-centre states with uniformly random play and branch each: the action names, the ball's
    offsets (states,) and the branches' rewards (states, follows, actions, length). Branches from one snapshot share
    the emulator's random numbers, so the first ``k`` rewards of a held branch are those of holding it ``k`` steps."""
    env = gym.make("LLMBreakout-text-v0", reward_shaping=shaping, fire_on_reset=True, terminal_on_life_loss=True)
    base = env.unwrapped
    actions = range(len(base.action_names))
    rng = np.random.default_rng(seed)
    base.reset(seed=seed)
    sides, tables = [], []
    while len(tables) < states:
        state = base.game_state
        offset = base.game.paddle_offset(state) if base.game.ball_in_play(state) else 0.0
        if abs(offset) > DEADBAND:
            snapshot = base.clone_state()
            tail = [int(a) for a in rng.integers(len(actions), size=length - 1)]
            held = [branch_rewards(base, snapshot, [a] * length) for a in actions]
            followed = [branch_rewards(base, snapshot, [a, *tail]) for a in actions]
            tables.append([held, followed])
            sides.append(offset)
            base.restore_state(snapshot)
        _, _, terminated, truncated, _ = base.step(int(rng.integers(len(actions))))
        if terminated or truncated:
            base.reset(seed=int(rng.integers(2**31)))
    env.close()
    return list(base.action_names), np.array(sides), np.array(tables)


def shares(names: list[str], sides: np.ndarray, returns: np.ndarray) -> dict[str, float]:
    """Means of the move towards the ball, away and NOOP, and the action's and the direction's share of the
    variance, from (states, actions) returns."""
    left, right, noop = names.index("LEFT"), names.index("RIGHT"), names.index("NOOP")
    idx = np.arange(len(sides))
    towards, away = np.where(sides > 0, right, left), np.where(sides > 0, left, right)
    moves = returns[:, [left, right]]
    return {
        "towards_mean": round(float(returns[idx, towards].mean()), 4),
        "away_mean": round(float(returns[idx, away].mean()), 4),
        "noop_mean": round(float(returns[:, noop].mean()), 4),
        "action_share": round(float(returns.var(axis=1).mean() / returns.var()), 4),
        "direction_share": round(float(moves.var(axis=1).mean() / moves.var()), 4),
    }


def measure(
    states: int,
    seed: int,
    shaping: float,
    horizons: tuple[int, ...],
    gamma: float,
    lambdas: tuple[float, ...] = LAMBDAS,
) -> dict[str, object]:
    """Per way of following the first action and horizon ``k``: :func:`shares` of the ``k``-step discounted shaped
    return; per ``gae_lambda``: those of ``sum_j (gamma * lambda)^j r_j`` over the random follow-up, a GAE advantage
    with a constant critic (the one the ``hidden`` runs have), up to the longest horizon."""
    length = max(horizons)
    names, sides, table = record(states, seed, shaping, length)
    report: dict[str, object] = {
        "states": len(sides),
        "seed": seed,
        "shaping": shaping,
        "gamma": gamma,
        "actions": names,
    }
    for f, follow in enumerate(FOLLOWS):
        for k in horizons:
            report[f"{follow} k={k}"] = shares(names, sides, table[:, f, :, :k] @ gamma ** np.arange(k))
    for lam in lambdas:
        report[f"gae_lambda={lam}"] = shares(names, sides, table[:, 1] @ (gamma * lam) ** np.arange(length))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shaping", type=float, default=10.0)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--horizons", default="1,2,4,8,16,32")
    args = parser.parse_args(argv)
    try:
        horizons = tuple(int(k) for k in args.horizons.split(","))
    except ValueError:
        parser.error(f"--horizons takes whole numbers separated by commas, e.g. 1,2,4; got {args.horizons!r}")
    if args.states < 2 or min(horizons) < 1:
        parser.error("--states needs at least 2 (a variance over states) and every horizon at least 1 step")
    report = measure(args.states, args.seed, args.shaping, horizons, args.gamma)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
