"""What a Breakout network sees: linear probes of its features for the ball, the paddle and their offset.

A run that never learns to track the ball (docs/nanogpt_breakout.md: about one seed in five) may lack the feature or
have it and not act on it; this tells the two apart. Every network is shown the same observations: Breakout ASCII
grids of games played by a fixed behaviour (the ball tracker, half of its steps replaced by a uniformly random
action, so the paddle is found at every offset from the ball), FIRE on reset, seeds of their own. For each network
a ridge regression from the features the heads read (the query position's final hidden state) to the ball's
column, the paddle's centre and the signed offset between them is fitted on the games of the first envs and scored
(R^2) on the others, with the sign of the offset (ball left / right of the paddle, where it is at least a paddle's
width beside it) as a linear classifier's accuracy. Beside them: how often the network's own greedy action moves the
paddle toward the ball there.

    python -m llm_gym.agents.nanogpt_ppo.probe RUN/checkpoints/step_N [...] [--random-init SEED] [--steps 8000]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from llm_gym.agent import EnvConfig, load_policy
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic
from llm_gym.agents.nanogpt_ppo.policy import NanoGPTPolicy
from llm_gym.agents.nanogpt_ppo.tokenizer import CharTokenizer
from llm_gym.envs.atari.breakout import PADDLE_WIDTH
from llm_gym.errors import CheckpointError

ENV_ID = "LLMBreakout-ascii-v0"
PROBE_SEED = 300_000_000
"""Seeds of the probe's games: apart from training (0...), evaluation (1,000,000...) and held-out play (1e8, 2e8)."""


@dataclass(frozen=True)
class Observations:
    """What the probe shows every network: the grids, and where ball and paddle were (pixels)."""

    texts: list[str]
    env_index: np.ndarray
    ball_x: np.ndarray
    paddle_centre: np.ndarray
    action_names: tuple[str, ...]


@dataclass(frozen=True)
class ProbeResult:
    network: str
    ball_r2: float
    paddle_r2: float
    offset_r2: float
    side_accuracy: float
    """Ball left or right of the paddle, read linearly from the features (0.5 is chance)."""
    toward_ball: float
    """Where the ball is a paddle's width or more beside the paddle: the share of greedy actions toward it."""
    action_share: dict[str, float]


def collect(steps: int, env_kwargs: dict, num_envs: int = 8, seed: int = PROBE_SEED) -> Observations:
    """``steps`` observations with the ball in play from ``num_envs`` games of the half-random tracker."""
    rng = np.random.default_rng(seed)
    kwargs = {"fire_on_reset": True, **env_kwargs}
    envs = [EnvConfig(ENV_ID, kwargs).make() for _ in range(num_envs)]
    texts, env_index, ball, paddle = [], [], [], []
    try:
        states = [env.reset(seed=seed + i) for i, env in enumerate(envs)]
        names = tuple(states[0][1]["action_names"])
        per_env = -(-steps // num_envs)
        for i, env in enumerate(envs):
            observation, info = states[i]
            game = env.unwrapped.game
            kept = 0
            while kept < per_env:
                state = info["game_state"]
                if state.ball_x is not None:
                    texts.append(str(observation))
                    env_index.append(i)
                    ball.append(state.ball_x)
                    paddle.append(state.ball_x - game.paddle_offset(state))  # the offset is from the paddle's centre
                    kept += 1
                tracked = game.scripted_action(state)
                action = names.index(tracked) if rng.random() < 0.5 else int(rng.integers(len(names)))
                observation, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    observation, info = env.reset()
    finally:
        for env in envs:
            env.close()
    return Observations(texts, np.array(env_index), np.array(ball, float), np.array(paddle, float), names)


@torch.inference_mode()
def features_and_actions(
    model: NanoGPTActorCritic, texts: Sequence[str], batch: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """The query position's final hidden state (N, C) and the greedy action (N,) of every observation."""
    tokenizer = CharTokenizer()
    model.eval()
    feats, actions = [], []
    for start in range(0, len(texts), batch):
        tokens, query = tokenizer.encode_batch(list(texts[start : start + batch]), model.shape.context)
        tokens, query = torch.from_numpy(tokens), torch.from_numpy(query)
        f = model.features(tokens, query)
        feats.append(f.numpy())
        actions.append(model.policy_head(f).argmax(-1).numpy())
    return np.concatenate(feats).astype(np.float64), np.concatenate(actions)


def ridge_predict(x: np.ndarray, y: np.ndarray, train: np.ndarray, ridge: float = 1e-3) -> np.ndarray:
    """Predictions for every row of a ridge regression fitted on the rows ``train`` (standardised features)."""
    mean, std = x[train].mean(0), x[train].std(0) + 1e-8
    z = np.c_[(x - mean) / std, np.ones(len(x))]
    a = z[train]
    return z @ np.linalg.solve(a.T @ a + ridge * len(a) * np.eye(a.shape[1]), a.T @ y[train])


def ridge_r2(x: np.ndarray, y: np.ndarray, train: np.ndarray, ridge: float = 1e-3) -> float:
    """R^2 on the rows outside ``train`` of a ridge regression fitted on ``train`` (standardised features)."""
    residual = y[~train] - ridge_predict(x, y, train, ridge)[~train]
    total = y[~train] - y[~train].mean()
    return float(1.0 - residual @ residual / max(total @ total, 1e-12))


def probe(model: NanoGPTActorCritic, data: Observations, name: str, train_envs: int = 6) -> ProbeResult:
    x, actions = features_and_actions(model, data.texts)
    train = data.env_index < train_envs
    offset = data.ball_x - data.paddle_centre
    sided = np.abs(offset) >= PADDLE_WIDTH  # clearly beside the paddle: one direction is right
    side = np.sign(offset)
    # A linear classifier of the side: ridge regression on +-1 targets, read by its sign.
    predicted_side = np.sign(ridge_predict(x[sided], side[sided], train[sided]))
    test = ~train[sided]
    side_accuracy = float(np.mean(predicted_side[test] == side[sided][test]))
    toward = {1.0: data.action_names.index("RIGHT"), -1.0: data.action_names.index("LEFT")}
    moves_toward = np.array([actions[i] == toward[side[i]] for i in np.flatnonzero(sided)])
    share = {n: float(np.mean(actions == k)) for k, n in enumerate(data.action_names)}
    return ProbeResult(
        name,
        ridge_r2(x, data.ball_x, train),
        ridge_r2(x, data.paddle_centre, train),
        ridge_r2(x, offset, train),
        side_accuracy,
        float(moves_toward.mean()) if len(moves_toward) else float("nan"),
        share,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoints/step_N (or best) directories")
    parser.add_argument("--steps", type=int, default=8000, help="observations with the ball in play")
    parser.add_argument("--random-init", type=int, action="append", default=[], help="also an untrained network")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        policies = [load_policy(checkpoint)[0] for checkpoint in args.checkpoints]
    except CheckpointError as exc:
        print(f"error: {exc}; pass a nanogpt_ppo run's checkpoints/step_N directory", file=sys.stderr)
        return 2
    if not all(isinstance(policy, NanoGPTPolicy) for policy in policies):
        print("error: the probe reads nanogpt_ppo networks; pass checkpoints of nanogpt_ppo runs", file=sys.stderr)
        return 2
    networks = [policy.model for policy in policies]
    # The first network's env arguments (its grid, a ball trail) draw what every network reads.
    data = collect(args.steps, policies[0].env_kwargs)
    results = []
    for seed in args.random_init:
        torch.manual_seed(seed)
        results.append(probe(NanoGPTActorCritic(networks[0].shape), data, f"random init {seed}"))
    for checkpoint, network in zip(args.checkpoints, networks, strict=True):
        results.append(probe(network, data, str(checkpoint)))
    print(f"{len(data.texts)} observations ({ENV_ID}, seeds {PROBE_SEED}+); R^2 and accuracy on the last 2 of 8 games")
    print(f"{'network':60} {'ball':>6} {'paddle':>6} {'offset':>6} {'side':>5} {'toward':>6}  greedy actions")
    for r in results:
        shares = " ".join(f"{k}:{v:.2f}" for k, v in r.action_share.items() if v > 0)
        print(
            f"{r.network[-60:]:60} {r.ball_r2:6.2f} {r.paddle_r2:6.2f} {r.offset_r2:6.2f} "
            f"{r.side_accuracy:5.2f} {r.toward_ball:6.2f}  {shares}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
