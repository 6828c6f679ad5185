"""How much room is there above the `scripted` tracker under the Breakout evaluation? Play hand-written variants.

The `scripted` agent (the demonstrator of the SFT warm start) moves the paddle towards where the ball is now and
stands still within 8 px of it. A variant here may instead aim at where the ball will cross the paddle row,
extrapolated from its last two positions with the side walls reflecting it (the agent's ``aim=landing``), and may
use another dead band (its ``deadband``). All play the evaluation of docs/results/breakout_sft.md (FIRE on reset,
``--max-steps`` cut, seeds ``--seed``, ``--seed + 1``, ...), so their scores compare with every policy there. The
prediction needs the ball's speed, which one frame of the text view does not give ("moving down-left"); ppo_lora's
``history`` setting shows the previous steps' positions.

    python scripts/breakout_scripted_variants.py --games 32 --seed 100 --deadband 8 12 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.evaluation import run_episodes
from llm_gym.stats import mean_ci95

ENV_ID = "LLMBreakout-text-v0"


class Variant:
    """The `scripted` agent with an aim and a dead band: ``predict=False, deadband=8`` is its default play, the same
    as ``llm-gym play --agent scripted --set aim=landing --set deadband=12`` is ``Variant(12, predict=True)``."""

    def __init__(self, deadband: int, predict: bool) -> None:
        self.deadband, self.aim = deadband, "landing" if predict else "ball"
        self.name = f"{'predict' if predict else 'tracker'}, dead band {deadband} px"

    def policy(self, env: EnvConfig) -> ScriptedPolicy:
        return ScriptedPolicy(env, aim=self.aim, deadband=self.deadband)


def play(variant: Variant, games: int, seed: int, max_steps: int) -> dict[str, Any]:
    env = EnvConfig(ENV_ID, {"fire_on_reset": True})
    results = run_episodes(variant.policy(env), env, games, seed=seed, num_envs=8, max_steps=max_steps)
    returns = [r.episode_return for r in results]
    mean, ci = mean_ci95(returns)
    return {
        "variant": variant.name,
        "mean": mean,
        "ci95": ci,
        "returns": returns,
        "lengths": [r.length for r in results],
        "cut": sum(r.truncated for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--deadband", type=int, nargs="+", default=[8, 12])
    parser.add_argument("--json", help="write every variant's games here")
    args = parser.parse_args()
    rows = []
    for predict in (False, True):
        for deadband in args.deadband:
            row = play(Variant(deadband, predict), args.games, args.seed, args.max_steps)
            rows.append(row)
            print(f"{row['variant']:28s} {row['mean']:6.2f} ± {row['ci95']:.2f}  ({row['cut']} of {args.games} "
                  f"games reach the {args.max_steps}-step cut)", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"games": args.games, "seed": args.seed, "max_steps": args.max_steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
