"""What one life returns under Breakout's training reward, for policies a learner can drift into.

Plays the real game with the env arguments `ppo_lora` trains with (``fire_on_reset``, ``terminal_on_life_loss``,
``reward_shaping``) and, for each policy, averages over lives: the whole return (undiscounted), its shaping part,
the game points and the steps. Constant policies and uniform random play are what an LM's policy falls into
when its greedy action stops depending on the state (docs/ppo_lora_breakout.md); the ``scripted`` tracker is the play the
shaping is meant to lead to. Run it once per shaping mode to see which of them each mode ranks first:

    python scripts/shaping_per_life.py --lives 100                      # potential 0 without a ball (default)
    python scripts/shaping_per_life.py --lives 100 --per-ball           # shaping_per_ball=true
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the envs)

POLICIES = ("NOOP", "FIRE", "LEFT", "RIGHT", "random", "scripted")


def per_life(policy: str, *, coef: float, per_ball: bool, lives: int, seed: int) -> dict[str, float]:
    """Means over ``lives`` lives of whole games started at ``seed``, ``seed + 1``, ...: return, shaping, points,
    steps."""
    env = gym.make(
        "LLMBreakout-text-v0", reward_shaping=coef, shaping_per_ball=per_ball, fire_on_reset=True,
        terminal_on_life_loss=True,
    ).unwrapped  # fmt: skip
    rng = np.random.default_rng(seed)
    names = env.ale_action_names
    totals = np.zeros((lives, 3))  # return, points, steps
    games = 0
    _, info = env.reset(seed=seed)
    for life in range(lives):
        done = False
        while not done:
            if policy == "random":
                action = int(rng.integers(len(names)))
            elif policy == "scripted":
                action = names.index(env.game.scripted_action(env.game_state))
            else:
                action = names.index(policy)
            _, reward, terminated, truncated, info = env.step(action)
            totals[life] += (reward, info["raw_reward"], 1)
            done = terminated or truncated
        if info["game_over"] or truncated:
            games += 1
            env.reset(seed=seed + games)
        else:
            env.reset()  # the next life of the same game
    ret, points, steps = totals.mean(axis=0)
    return {"return": ret, "shaping": ret - points, "points": points, "steps": steps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lives", type=int, default=100, help="lives per policy (default 100)")
    parser.add_argument("--coef", type=float, default=10.0, help="reward_shaping (default 10, the docs' recipe)")
    parser.add_argument("--per-ball", action="store_true", help="shaping_per_ball=true")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first game (default 0)")
    args = parser.parse_args(argv)
    print(f"reward_shaping={args.coef:g} shaping_per_ball={str(args.per_ball).lower()}, {args.lives} lives each")
    print("| policy | return per life | shaping | game points | steps |")
    print("| --- | --- | --- | --- | --- |")
    for policy in POLICIES:
        m = per_life(policy, coef=args.coef, per_ball=args.per_ball, lives=args.lives, seed=args.seed)
        print(f"| {policy} | {m['return']:.2f} | {m['shaping']:.2f} | {m['points']:.2f} | {m['steps']:.1f} |")


if __name__ == "__main__":
    main()
