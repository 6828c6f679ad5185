"""What a Breakout run's first rollout teaches: the shaped reward each action earns in a game's opening steps.

A ``ppo_lora`` run resets every env at once, so its first rollout (``num_steps`` decisions per env) is made of
nothing but game openings: the serve and the ball's first fall. This plays uniformly random actions on the training
env (its env arguments plus the training defaults: FIRE on reset, an episode per life) and reports, for each
action, how often it was drawn and the mean shaped reward of the step it was taken on, in four windows of
``--steps`` steps per game:

- ``opening``: from the reset, as in a run's first rollout;
- ``after_noops``: after 0-``--noop-max`` NOOPs drawn per game (the Atari literature's no-op starts);
- ``later``: after ``--later`` steps of the ``scripted`` tracker (a game well under way);
- ``after_random``: after 0-``--spread`` uniformly random actions drawn per game (``ppo_lora``'s ``start_spread``,
  which plays them before the first rollout so that the envs do not all start it at a game's opening).

    python scripts/breakout_opening_rewards.py [--games 64] [--steps 16] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from llm_gym.agent import EnvConfig
from llm_gym.training import training_env

ENV_ID = "LLMBreakout-text-v0"


def window(env: EnvConfig, games: int, steps: int, lead: str, lead_steps: int, seed: int) -> dict[str, dict]:
    """Per action: draws and the mean shaped reward of the step, over ``steps`` random actions per game after a
    lead-in of ``lead`` ("none", "noops": a random 0..lead_steps NOOPs, "random": a random 0..lead_steps random
    actions, "tracker": lead_steps tracker steps)."""
    draws = np.random.default_rng(seed)
    rewards: dict[str, list[float]] = defaultdict(list)
    for game in range(games):
        played = env.make()
        try:
            game_env = played.unwrapped
            names = game_env.ale_action_names
            _, info = played.reset(seed=seed + game)
            drawn = int(draws.integers(lead_steps + 1))  # drawn for every window: the reports stay as first published
            lead_in = {"none": 0, "noops": drawn, "random": drawn, "tracker": lead_steps}[lead]
            for _ in range(lead_in):
                if lead == "random":
                    action = int(draws.integers(len(names)))
                else:
                    name = "NOOP" if lead == "noops" else game_env.game.scripted_action(info["game_state"])
                    action = names.index(name)
                _, _, terminated, truncated, info = played.step(action)
                if terminated or truncated:
                    _, info = played.reset()
            for _ in range(steps):
                action = int(draws.integers(len(names)))
                _, reward, terminated, truncated, info = played.step(action)
                rewards[names[action]].append(float(reward))
                if terminated or truncated:
                    _, info = played.reset()
        finally:
            played.close()
    return {name: {"draws": len(r), "mean_reward": float(np.mean(r))} for name, r in sorted(rewards.items())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=64, help="games per window (a run's num_envs)")
    parser.add_argument("--steps", type=int, default=16, help="random steps per game (a run's num_steps)")
    parser.add_argument("--noop-max", type=int, default=30)
    parser.add_argument("--spread", type=int, default=128, help="most random actions before the after_random window")
    parser.add_argument("--later", type=int, default=150, help="tracker steps before the later window")
    parser.add_argument("--shaping", type=float, default=10.0, help="the env's reward_shaping")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    env = training_env(EnvConfig(ENV_ID, {"reward_shaping": args.shaping}))
    report = {
        "env": {"env_id": env.env_id, **env.kwargs}, "games": args.games, "steps": args.steps, "seed": args.seed,
        "opening": window(env, args.games, args.steps, "none", 0, args.seed),
        "after_noops": window(env, args.games, args.steps, "noops", args.noop_max, args.seed),
        "after_random": window(env, args.games, args.steps, "random", args.spread, args.seed),
        "later": window(env, args.games, args.steps, "tracker", args.later, args.seed),
    }  # fmt: skip
    for name in ("opening", "after_noops", "after_random", "later"):
        print(f"{name:>12}:", "  ".join(f"{a} {v['mean_reward']:+.3f}" for a, v in report[name].items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
