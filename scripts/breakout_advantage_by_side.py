"""How loudly do PPO's advantages say "move towards the ball"? The learning signal a Breakout run gets for tracking.

Plays a ``ppo_lora`` checkpoint (sampled, as its rollouts are) on the env it trained on, with its own value head,
and computes the advantages PPO would (GAE over the play, normalised over it as ``advantage_norm=rollout`` does)
for the run's ``gae_lambda`` and for other values. For the LEFT / RIGHT decisions taken with the ball in play more
than 8 px from the paddle's centre, it reports the mean advantage of the moves towards the ball and of those away
from it (each with its standard error), the mean advantage of NOOP / FIRE in the same states, the immediate shaped
reward of each group, and the share of the LEFT / RIGHT decisions' advantage variance that the direction explains
(the squared correlation): the part of the policy gradient that could teach tracking, against everything else.
It also reports the decisions of the last ``END_WINDOW`` steps before an episode end (in training, a lost ball):
their mean advantage and their share of the advantages' sum of squares. At a lost ball the shaping pays back the
paddle's distance (docs/atari.md), and a critic below the returns adds its own error there, so these few decisions
can carry much of the gradient whatever action they took.
Each lambda is reported three times: with the run's critic, with its mean in its place, and with 0 in its place.

    python scripts/breakout_advantage_by_side.py runs/RUN/checkpoints/step_N [--envs 16] [--steps 64] [--seed 500]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch

from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import compute_gae

_spec = importlib.util.spec_from_file_location("value_decodability", Path(__file__).with_name("value_decodability.py"))
decodability = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(decodability)  # type: ignore[union-attr]

DEADBAND = decodability.SIDE_DEADBAND
END_WINDOW = 3
"""Decisions counted as "before an episode end": the ending one and the two before it (about the reach of a
0.5-lambda advantage, whose weights halve each step)."""


def play(checkpoint: Path, envs: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    """Sampled play of ``envs`` x ``steps`` decisions (one more to bootstrap), recorded by value_decodability's
    :func:`record` on one thread: values, scaled rewards, episode ends, the ball's signed offset from the paddle
    (0 when not in play) and the action names taken."""
    configure_threads(1)
    config, data = decodability.record(checkpoint, envs, steps, seed)
    game = data["game"]
    sides = np.where(game[..., 0] > 0, game[..., 6], 0.0)
    return {"values": data["values"], "rewards": data["rewards"], "ended": data["ended"], "sides": sides,
            "names": data["names"], "gamma": np.array(config.gamma), "gae_lambda": np.array(config.gae_lambda)}  # fmt: skip


def advantages(data: dict[str, np.ndarray], gae_lambda: float) -> np.ndarray:
    """(steps, envs) GAE advantages with ``gae_lambda``, normalised over the whole play."""
    ended = torch.tensor(data["ended"], dtype=torch.float64)  # (steps + 1, envs): whether step t ended an episode
    follows_reset = torch.cat([torch.zeros(1, ended.shape[1], dtype=ended.dtype), ended[:-2]])
    values = torch.tensor(data["values"])
    advantage, _ = compute_gae(
        torch.tensor(data["rewards"][:-1], dtype=torch.float64), values[:-1], follows_reset, values[-1], ended[-2],
        float(data["gamma"]), gae_lambda,
    )  # fmt: skip
    a = advantage.numpy()
    return (a - a.mean()) / (a.std() + 1e-8)


def by_direction(data: dict[str, np.ndarray], gae_lambda: float) -> dict[str, object]:
    """Mean advantage (and reward) of moves towards / away from the ball and of NOOP / FIRE off-centre."""
    adv = advantages(data, gae_lambda)
    side, names, rewards = data["sides"][:-1], data["names"][:-1], data["rewards"][:-1]
    left, right, off = names == "LEFT", names == "RIGHT", np.abs(side) > DEADBAND
    towards = off & ((left & (side < 0)) | (right & (side > 0)))
    away = off & ((left & (side > 0)) | (right & (side < 0)))
    still = off & np.isin(names, ["NOOP", "FIRE"])
    report: dict[str, object] = {}
    for label, mask in (("towards", towards), ("away", away), ("noop_or_fire", still)):
        a = adv[mask]
        report[label] = {
            "n": int(mask.sum()),
            "advantage_mean": float(a.mean()) if a.size else float("nan"),
            "advantage_se": float(a.std() / np.sqrt(a.size)) if a.size > 1 else float("nan"),
            "reward_mean": float(rewards[mask].mean()) if a.size else float("nan"),
        }
    moved = towards | away
    if towards.any() and away.any():
        r = np.corrcoef(towards[moved].astype(float), adv[moved])[0, 1]
        report["direction_share_of_variance"] = float(r**2)
    report["before_an_end"] = before_an_end(adv, data["ended"][:-1])
    return report


def before_an_end(adv: np.ndarray, ended: np.ndarray) -> dict[str, float]:
    """The decisions in the last ``END_WINDOW`` steps of an episode (``ended``: (steps, envs), 1 where a step ended
    one): how many, their mean advantage, and their share of the advantages' sum of squares."""
    near = np.zeros(ended.shape, dtype=bool)
    for k in range(END_WINDOW):
        near[: ended.shape[0] - k] |= ended[k:] > 0
    a = adv[near]
    return {
        "n": int(near.sum()),
        "share_of_decisions": float(near.mean()),
        "advantage_mean": float(a.mean()) if a.size else float("nan"),
        "share_of_sum_of_squares": float((a**2).sum() / max(float((adv**2).sum()), 1e-12)),
    }


def with_constant_critic(data: dict[str, np.ndarray], value: float | None = None) -> dict[str, np.ndarray]:
    """The play with its critic replaced by one value (``value``, by default its mean over the play): advantages
    from it show what the critic's differences between states add to, or take from, the direction's share. At 0
    (where a ``value_input=standardized`` head starts) what is left at an episode's end is the rewards' own."""
    constant = data["values"].mean() if value is None else value
    return {**data, "values": np.full_like(data["values"], constant)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--lambdas", default="run,0.8,0.5,0", help="GAE lambdas to report ('run': the run's own)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--save", type=Path, help="keep the recorded arrays here (npz)")
    parser.add_argument("--load", type=Path, help="read recorded arrays (npz) instead of playing")
    args = parser.parse_args(argv)
    data = dict(np.load(args.load)) if args.load else play(args.checkpoint, args.envs, args.steps, args.seed)
    if args.save:
        np.savez_compressed(args.save, **data)
    report: dict[str, object] = {"checkpoint": str(args.checkpoint), "envs": int(data["values"].shape[1]),
                                 "steps": int(data["values"].shape[0] - 1), "seed": args.seed,
                                 "gamma": float(data["gamma"])}  # fmt: skip
    flat, zero = with_constant_critic(data), with_constant_critic(data, 0.0)
    for item in args.lambdas.split(","):
        lam = float(data["gae_lambda"]) if item == "run" else float(item)
        report[f"gae_lambda={lam:g}"] = by_direction(data, lam)
        report[f"gae_lambda={lam:g}, constant critic"] = by_direction(flat, lam)
        report[f"gae_lambda={lam:g}, critic at zero"] = by_direction(zero, lam)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
