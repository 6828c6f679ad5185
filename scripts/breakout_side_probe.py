"""Does a Breakout policy's action depend on where the ball is? Probe checkpoints on one fixed set of states.

The states come from the ``scripted`` tracker's games (FIRE on reset; whole games from ``--seed``, ``--seed + 1``,
...): every step with a ball in play at least ``--min-offset`` pixels to one side of the paddle centre, where
moving towards the ball is the useful action. Each policy scores every state once (its action probabilities, no
play), and the report gives, for balls left and right of the paddle, the mean probability of each action, the
share of states whose most likely action moves towards the ball, and the tracking margin: P(towards) - P(away)
averaged over all states (0 for a policy that ignores the ball's side, 1 for one that always moves towards it). A
policy that is greedy-constant shows the same top action on both sides (docs/ppo_lora_breakout.md).

    python scripts/breakout_side_probe.py zero-shot runs/RUN/checkpoints/step_N [...] [--states 400] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig, load_policy

ENV_ID = "LLMBreakout-text-v0"
ZERO_SHOT = "zero-shot"


def tracker_states(count: int, seed: int, min_offset: float) -> list[tuple[str, dict, int]]:
    """``count`` (observation, info, side) of the tracker's games, side -1 for a ball left of the paddle, +1 right."""
    env = gym.make(ENV_ID, fire_on_reset=True).unwrapped
    names = env.ale_action_names
    states: list[tuple[str, dict, int]] = []
    game = 0
    obs, info = env.reset(seed=seed)
    while len(states) < count:
        state = info["game_state"]
        if env.game.ball_in_play(state) and abs(env.game.paddle_offset(state)) >= min_offset:
            states.append((obs, info, 1 if env.game.paddle_offset(state) > 0 else -1))
        obs, _, terminated, truncated, info = env.step(names.index(env.game.scripted_action(state)))
        if terminated or truncated:
            game += 1
            obs, info = env.reset(seed=seed + game)
    return states


def probe(source: str, states: list[tuple[str, dict, int]], batch: int) -> dict:
    """Action probabilities of ``source`` (a checkpoint, or ``zero-shot`` for the untrained default model) on
    ``states``, summed up by the ball's side."""
    env = EnvConfig(ENV_ID, {"fire_on_reset": True})
    overrides = {"threads": 1}
    if source == ZERO_SHOT:
        from llm_gym.config import apply_overrides
        from llm_gym.plugins import get_agent

        agent_cls = get_agent("lm")
        policy = agent_cls(apply_overrides(agent_cls.Config(), overrides)).policy(env)
    else:
        policy, _ = load_policy(source, env, overrides)
    names = list(states[0][1]["action_names"])
    probs, values = [], []
    for start in range(0, len(states), batch):
        chunk = states[start : start + batch]
        _, details = policy.act_with_details([s[0] for s in chunk], [s[1] for s in chunk])
        probs.extend(d["probs"] for d in details)
        values.extend(d["value"] for d in details if "value" in d)
    p, side = np.asarray(probs), np.asarray([s[2] for s in states])
    top, left, right = p.argmax(axis=1), names.index("LEFT"), names.index("RIGHT")
    towards = np.where(side > 0, p[:, right], p[:, left])
    away = np.where(side > 0, p[:, left], p[:, right])
    top_towards = np.where(side > 0, right, left) == top
    by_side = {}
    for label, mask in (("ball left", side < 0), ("ball right", side > 0)):
        by_side[label] = {
            "states": int(mask.sum()),
            "mean_probs": {n: round(float(p[mask, i].mean()), 3) for i, n in enumerate(names)},
            "top_action": {n: int((top[mask] == i).sum()) for i, n in enumerate(names)},
        }
    return {
        "policy": source,
        "tracking_margin": round(float((towards - away).mean()), 3),
        "top_action_towards_ball": round(float(top_towards.mean()), 3),
        **by_side,
        # The checkpoint's value head on the same states (none for zero-shot): where it sits against the returns
        # matters, since a life lost has advantage -V (docs/ppo_lora_breakout_critic.md, "A fresh value head's starting value").
        **(
            {"value_mean": round(float(np.mean(values)), 4), "value_std": round(float(np.std(values)), 4)}
            if values
            else {}
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", help=f"checkpoints (or run dirs), or {ZERO_SHOT}")
    parser.add_argument("--states", type=int, default=400, help="states to probe (default 400)")
    parser.add_argument("--seed", type=int, default=100, help="seed of the tracker's first game (default 100)")
    parser.add_argument("--min-offset", type=float, default=12.0, help="pixels between ball and paddle centre")
    parser.add_argument("--batch", type=int, default=16, help="states per policy call (default 16)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    states = tracker_states(args.states, args.seed, args.min_offset)
    print(
        "| policy | tracking margin | top action towards the ball | top actions, ball left | top actions, ball right "
        "| value: mean ± sd |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    results = []
    for source in args.policies:
        r = probe(source, states, args.batch)
        results.append(r)
        tops = [
            " ".join(f"{n} {c}" for n, c in r[side]["top_action"].items() if c) for side in ("ball left", "ball right")
        ]
        print(
            f"| {source} | {r['tracking_margin']:+.3f} | {r['top_action_towards_ball']:.2f} | {tops[0]} | {tops[1]} "
            + (f"| {r['value_mean']:+.3f} ± {r['value_std']:.3f} |" if "value_mean" in r else "| |")
        )
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"states": len(states), "seed": args.seed, "min_offset": args.min_offset, "results": results},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
