"""How much room is there above the `scripted` tracker under the Breakout evaluation? Play hand-written variants.

The `scripted` agent (the demonstrator of the SFT warm start) moves the paddle towards where the ball is now and
stands still within 8 px of it. A variant here may instead aim at where the ball will cross the paddle row,
extrapolated from its last two positions with the side walls reflecting it (``--predict``), and may use another
dead band. All play the evaluation of docs/results/breakout_sft.md (FIRE on reset, ``--max-steps`` cut, seeds
``--seed``, ``--seed + 1``, ...), so their scores compare with every policy there. The prediction needs the ball's
speed, which one frame of the text view does not give ("moving down-left"); ppo_lora's ``history`` setting shows
the previous steps' positions.

    python scripts/breakout_scripted_variants.py --games 32 --seed 100 --deadband 8 12 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig
from llm_gym.envs.atari.breakout import LEFT_WALL, PADDLE_Y, RIGHT_WALL, BreakoutState
from llm_gym.evaluation import run_episodes
from llm_gym.stats import mean_ci95

ENV_ID = "LLMBreakout-text-v0"


def reflect(x: float, low: float = LEFT_WALL, high: float = RIGHT_WALL - 1) -> float:
    """Where a ball travelling ``x - low`` px from ``low`` ends up between walls at ``low`` and ``high`` that
    reflect it (a zig-zag of period twice the gap)."""
    span = high - low
    folded = (x - low) % (2 * span)
    return low + (folded if folded <= span else 2 * span - folded)


def landing_x(state: BreakoutState) -> float | None:
    """The ball's x where it will reach the paddle row, from its last two positions; None unless it is falling."""
    if state.ball_x is None or state.previous_ball_x is None or state.previous_ball_y is None:
        return None
    vx, vy = state.ball_x - state.previous_ball_x, state.ball_y - state.previous_ball_y
    if vy <= 0:
        return None
    return reflect(state.ball_x + vx * (PADDLE_Y - state.ball_y) / vy)


class Variant:
    """Moves the paddle centre towards a target x (the ball, or with ``predict`` where a falling ball will land);
    NOOP within ``deadband`` px of it; FIRE with no ball in play. ``predict=False, deadband=8`` is ``scripted``."""

    def __init__(self, deadband: int, predict: bool) -> None:
        self.deadband, self.predict = deadband, predict
        self.name = f"{'predict' if predict else 'tracker'}, dead band {deadband} px"

    def choose(self, state: BreakoutState) -> str:
        if state.ball_x is None:
            return "FIRE"
        landing = landing_x(state) if self.predict else None
        target = (landing if landing is not None else state.ball_x) + 1  # +1: the ball's centre, as paddle_offset
        offset = target - state.paddle_centre
        if abs(offset) < self.deadband:
            return "NOOP"
        return "RIGHT" if offset > 0 else "LEFT"

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        return [list(info["action_names"]).index(self.choose(info["game_state"])) for info in infos]


def play(variant: Variant, games: int, seed: int, max_steps: int) -> dict[str, Any]:
    results = run_episodes(
        variant, EnvConfig(ENV_ID, {"fire_on_reset": True}), games, seed=seed, num_envs=8, max_steps=max_steps
    )
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
