"""Where does a greedy Breakout policy lose its balls? Play whole games and describe every life lost.

Plays ``--games`` games (seeds ``--seed``, ``--seed + 1``, ...; FIRE on reset, ``--max-steps`` cut, all games in
one batch) greedily and, for every life lost, looks at the last step before the ball passed the paddle row: which
side of the paddle the ball was on, how far, whether the paddle was against a wall, and which actions the policy took
in the steps before. The side probe (``breakout_side_probe.py``) scores states from the tracker's games; this looks
at the states the policy's own play reaches, which is where a policy that tracks in the probe can still lose.

    python scripts/breakout_life_losses.py runs/RUN/checkpoints/step_N [...] [--games 8] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig, load_policy
from llm_gym.envs.atari.breakout import LEFT_WALL, PADDLE_WIDTH, PADDLE_Y, RIGHT_WALL

ENV_ID = "LLMBreakout-text-v0"
LAST_STEPS = 9  # actions counted before the ball reaches the paddle row: about one descent's final third


def play(source: str, games: int, seed: int, max_steps: int) -> list[list[dict]]:
    """Every step of ``games`` greedy games: paddle x, ball y, the ball's offset from the paddle centre (None with
    no ball in play), lives, score and the action taken."""
    policy, _ = load_policy(source, EnvConfig(ENV_ID, {"fire_on_reset": True}), {"threads": 1})
    envs = [gym.make(ENV_ID, fire_on_reset=True, max_episode_steps=max_steps) for _ in range(games)]
    game = envs[0].unwrapped.game
    obs, infos = map(list, zip(*(env.reset(seed=seed + i) for i, env in enumerate(envs)), strict=True))
    logs: list[list[dict]] = [[] for _ in envs]
    running = list(range(games))
    while running:
        actions = policy.act([obs[i] for i in running], [infos[i] for i in running])
        for i, action in zip(list(running), actions, strict=True):
            state, names = infos[i]["game_state"], list(infos[i]["action_names"])
            index = names.index(action) if isinstance(action, str) else int(action)
            offset = game.paddle_offset(state) if game.ball_in_play(state) else None
            logs[i].append(
                {"paddle_x": state.paddle_x, "ball_y": state.ball_y, "offset": offset, "lives": state.lives}
                | {"score": state.score, "action": names[index]}
            )
            obs[i], _, terminated, truncated, infos[i] = envs[i].step(index)
            if terminated or truncated:
                end = infos[i]["game_state"]
                logs[i].append({"lives": end.lives, "score": end.score, "end": True})
                running.remove(i)
    return logs


def life_losses(logs: list[list[dict]]) -> list[dict]:
    """One record per life lost: the ball's offset from the paddle centre at its last step above the paddle row,
    the paddle's x there, and the actions of the ``LAST_STEPS`` steps up to it."""
    losses = []
    for game in logs:
        for i in range(1, len(game)):
            if game[i]["lives"] >= game[i - 1]["lives"]:
                continue
            j = i - 1
            while j >= 0 and (game[j].get("ball_y") is None or game[j]["ball_y"] > PADDLE_Y):
                j -= 1
            if j < 0:
                continue
            step = game[j]
            losses.append(
                {
                    "offset": step["offset"],
                    "paddle_x": step["paddle_x"],
                    "actions": Counter(s["action"] for s in game[max(0, j - LAST_STEPS + 1) : j + 1]),
                }
            )
    return losses


def against_wall(paddle_x: int) -> str | None:
    """``left`` or ``right`` for a paddle touching that wall, else None."""
    if paddle_x <= LEFT_WALL:
        return "left"
    return "right" if paddle_x >= RIGHT_WALL - PADDLE_WIDTH else None


def summarise(source: str, logs: list[list[dict]]) -> dict:
    losses = life_losses(logs)
    in_play = [s for game in logs for s in game if s.get("offset") is not None]
    walls = Counter(against_wall(s["paddle_x"]) for s in in_play)
    loss_walls = Counter(against_wall(loss["paddle_x"]) for loss in losses)
    steps = max(len(in_play), 1)
    actions: Counter = Counter()
    for loss in losses:
        actions.update(loss["actions"])
    total = sum(actions.values()) or 1
    return {
        "policy": source,
        "games": len(logs),
        "game_scores": [game[-1]["score"] for game in logs],
        "steps_with_ball_in_play": len(in_play),
        "share_of_those_against_left_wall": round(walls["left"] / steps, 3),
        "share_of_those_against_right_wall": round(walls["right"] / steps, 3),
        "lives_lost": len(losses),
        "ball_left_of_paddle": sum(loss["offset"] < 0 for loss in losses),
        "ball_right_of_paddle": sum(loss["offset"] > 0 for loss in losses),
        "median_abs_offset": float(np.median([abs(loss["offset"]) for loss in losses])) if losses else None,
        "paddle_against_left_wall": loss_walls["left"],
        "paddle_against_right_wall": loss_walls["right"],
        f"actions_in_last_{LAST_STEPS}_steps": {a: round(n / total, 2) for a, n in actions.most_common()},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", help="checkpoints (or run dirs)")
    parser.add_argument("--games", type=int, default=8, help="games per policy (default 8)")
    parser.add_argument("--seed", type=int, default=100, help="seed of the first game (default 100)")
    parser.add_argument("--max-steps", type=int, default=1000, help="cut a game after this many steps")
    parser.add_argument("--json", help="also write the summaries here")
    args = parser.parse_args(argv)
    results = []
    for source in args.policies:
        result = summarise(source, play(source, args.games, args.seed, args.max_steps))
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "max_steps": args.max_steps, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
