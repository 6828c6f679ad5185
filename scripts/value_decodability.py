"""Could a linear value head on a checkpoint's hidden state predict PPO's returns on Breakout, and does it?

Plays a ``ppo_lora`` checkpoint (sampled, as its rollouts are) on the env it trained on (its own env arguments and
the training defaults: FIRE on reset, an episode per life), records at every decision the hidden state the value
head reads, the head's value, the reward (times the run's ``reward_scale``) and the decoded game state, and
computes PPO's value targets (GAE returns with the run's ``gamma`` and ``gae_lambda``, bootstrapped from the head
at the end). It then reports the explained variance (1 - Var(target - prediction) / Var(target), the
``losses/explained_variance`` of training) of:

- ``head``: the checkpoint's own value head;
- ``ridge/hidden`` and ``ridge/unit``: a ridge regression refitted on the hidden state as it is and scaled to unit
  length (what ``value_input=hidden`` / ``unit`` read): what the best linear head on that input could reach;
- ``ridge/game``: a ridge regression on a few decoded game quantities (ball and paddle positions, the ball's
  offset from the paddle now and where it will land, lives), a reference for what the state itself tells.
- ``side``: what a policy needs first: whether a linear read of the same hidden state (standardised) tells which
  side of the paddle the ball is on (a ridge classifier on +-1 targets, over the states with the ball in play more
  than 8 px from the paddle's centre, the tracker's dead band), as accuracy on held-out envs beside the majority
  side's share. That is what ``action_head=standardized`` reads.

- ``adam/<input>``: a fresh :class:`ValueHead` of each ``value_input`` trained by Adam at the run's learning rate
  with as many steps, of the same size, as PPO gives its head in a run of ``--updates`` updates (``update_epochs``
  x at most ``max_minibatches`` each): what the head reaches when the state is all that changes (the targets held fixed,
  no value clip). A ``standardized`` head first observes the training states.

Every fit is scored on envs it was not fitted on (folds of whole envs; the ridge penalty chosen inside the training
envs), so a number above zero is a prediction, not a memory of the states. ``--save`` keeps the recorded arrays
(npz) and ``--load`` reads them instead of playing.

    python scripts/value_decodability.py runs/RUN/checkpoints/step_N [--envs 16] [--steps 128] [--seed 500]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.train import initial_actor_critic
from llm_gym.agents.ppo_lora.value_head import INPUTS, ValueHead
from llm_gym.config import from_dict
from llm_gym.envs.atari.breakout import landing_x
from llm_gym.envs.protocol import EnvTraits, legal_choices
from llm_gym.rl import compute_gae
from llm_gym.rl import explained_variance as rl_explained_variance
from llm_gym.training import training_env

ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)


def game_features(game, state) -> list[float]:  # noqa: ANN001  (the env's game and its decoded state)
    """Decoded quantities a critic could use: ball in play, its position and motion, the paddle, the ball's offset
    from the paddle now and at its landing (signed and absolute), lives."""
    if state.ball_x is None:
        return [0.0, 0, 0, 0, 0, state.paddle_x, 0, 0, 0, 0, state.lives]
    offset = game.paddle_offset(state)
    landing = landing_x(state)
    land = 0.0 if landing is None else landing + 1 - state.paddle_centre
    return [1.0, state.ball_x, state.ball_y, state.ball_dx, state.ball_dy, state.paddle_x, offset, abs(offset),
            land, abs(land), state.lives]  # fmt: skip


def record(checkpoint: Path, envs: int, steps: int, seed: int) -> tuple[PPOLoRAConfig, dict[str, np.ndarray]]:
    """Sampled play of ``envs`` x (``steps`` + 1) decisions of a checkpoint, as its rollouts are: per decision the
    hidden state its value head reads, the head's value, the decoded game, the action's name, the reward (times
    ``reward_scale``) and whether the step ended an episode (each (steps + 1, envs[, ...])); with the run's config."""
    record = json.loads((checkpoint.parent.parent / "config.json").read_text())
    config = from_dict(PPOLoRAConfig, {**record["config"], "init_adapter": str(checkpoint), "threads": 1})
    env = training_env(EnvConfig(record["env_id"], record["env_kwargs"]))
    ac = initial_actor_critic(config, EnvTraits.probe(env).instructions, None)
    captured: list[torch.Tensor] = []
    ac.value_head.register_forward_hook(lambda _m, args, _out: captured.append(args[0].detach().float().cpu()))
    games = [env.make() for _ in range(envs)]
    started = [g.reset(seed=seed + i) for i, g in enumerate(games)]
    observations, infos = [s[0] for s in started], [s[1] for s in started]
    generator = torch.Generator().manual_seed(seed)
    hidden, values, rewards, dones, features, names = [], [], [], [], [], []
    for _ in range(steps + 1):  # the last decision only bootstraps
        captured.clear()
        decided = act(ac, strategy_for(config), observations, infos, env.env_id, generator=generator, keep_hidden=False)
        hidden.append(captured[-1].numpy())
        values.append(decided.values.numpy())
        features.append([game_features(g.unwrapped.game, i["game_state"]) for g, i in zip(games, infos, strict=True)])
        step_rewards, step_dones, step_names = [], [], []
        for k, (g, action) in enumerate(zip(games, decided.actions, strict=True)):
            ids, action_names = legal_choices(infos[k], env.env_id)
            step_names.append(action_names[ids.index(int(action))])
            observations[k], reward, terminated, truncated, infos[k] = g.step(action)
            if terminated or truncated:
                observations[k], infos[k] = g.reset()  # an episode per life: the same game goes on
            step_rewards.append(reward * config.reward_scale)
            step_dones.append(float(terminated or truncated))
        rewards.append(step_rewards)
        dones.append(step_dones)
        names.append(step_names)
    for g in games:
        g.close()
    return config, {
        "hidden": np.array(hidden), "values": np.array(values), "game": np.array(features, dtype=np.float64),
        "names": np.array(names), "rewards": np.array(rewards, dtype=np.float32),
        "ended": np.array(dones, dtype=np.float32),
    }  # fmt: skip


def play(checkpoint: Path, envs: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    """:func:`record`, with PPO's value targets (GAE returns with the run's gamma and lambda, bootstrapped from the
    head at the end)."""
    config, data = record(checkpoint, envs, steps, seed)
    # compute_gae's convention: dones[t] says whether s_t followed a reset, so each step's flag moves one row down.
    ended = torch.tensor(data["ended"])  # (steps + 1, envs): whether step t ended an episode
    follows_reset = torch.cat([torch.zeros(1, envs), ended[:-2]])
    values = data["values"]
    _, returns = compute_gae(
        torch.tensor(data["rewards"][:-1]), torch.tensor(values[:-1]), follows_reset,
        torch.tensor(values[-1]), ended[-2], config.gamma, config.gae_lambda,
    )  # fmt: skip
    return {
        "hidden": data["hidden"][:-1],  # (steps, envs, H)
        "head": values[:-1],
        "target": returns.numpy(),
        "game": data["game"][:-1],
    }


def explained_variance(target: np.ndarray, prediction: np.ndarray) -> float:
    """Training's own ``losses/explained_variance`` (llm_gym.rl), on arrays."""
    return rl_explained_variance(
        torch.as_tensor(prediction, dtype=torch.float64), torch.as_tensor(target, dtype=torch.float64)
    )


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Fit on standardised columns; returns (mean, scale, weights, intercept)."""
    mean, scale = x.mean(0), x.std(0) + 1e-8
    z = (x - mean) / scale
    weights = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - y.mean()))
    return mean, scale, weights, float(y.mean())


def predict(fit: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, weights, intercept = fit
    return (x - mean) / scale @ weights + intercept


def held_out_ev(x: np.ndarray, y: np.ndarray, folds: int) -> tuple[float, list[float]]:
    """x (steps, envs, F), y (steps, envs): explained variance on held-out envs, pooled over ``folds`` folds of
    whole envs, each fold's penalty chosen by the same folding inside its training envs; and the chosen penalties."""
    envs = np.arange(y.shape[1])
    groups = np.array_split(envs, folds)
    predictions, chosen = np.zeros_like(y), []
    for test in groups:
        train = np.setdiff1d(envs, test)
        inner = np.array_split(train, max(2, min(folds - 1, len(train))))
        scores = []
        for alpha in ALPHAS:
            errors = []
            for check in inner:
                fit_on = np.setdiff1d(train, check)
                fit = ridge(x[:, fit_on].reshape(-1, x.shape[2]), y[:, fit_on].reshape(-1), alpha)
                errors.append(
                    np.mean((predict(fit, x[:, check].reshape(-1, x.shape[2])) - y[:, check].reshape(-1)) ** 2)
                )
            scores.append(np.mean(errors))
        alpha = ALPHAS[int(np.argmin(scores))]
        chosen.append(alpha)
        fit = ridge(x[:, train].reshape(-1, x.shape[2]), y[:, train].reshape(-1), alpha)
        predictions[:, test] = predict(fit, x[:, test].reshape(-1, x.shape[2])).reshape(y.shape[0], len(test))
    return explained_variance(y.reshape(-1), predictions.reshape(-1)), chosen


SIDE_DEADBAND = 8
"""Pixels from the paddle's centre within which the ``scripted`` tracker stands still: no side to tell."""


def held_out_side_accuracy(hidden: np.ndarray, game: np.ndarray, folds: int) -> dict[str, float]:
    """Held-out accuracy of a ridge classifier telling the ball's side of the paddle from ``hidden`` (steps, envs,
    H), over folds of whole envs (each fold's penalty chosen by accuracy on folds of its training envs); with the
    majority side's share of the same states and their count."""
    side = game[..., 6]  # the ball's signed offset from the paddle's centre (game_features)
    usable = (game[..., 0] > 0) & (np.abs(side) > SIDE_DEADBAND)
    target = np.where(side > 0, 1.0, -1.0)
    envs = np.arange(hidden.shape[1])

    def accuracy(fit_on: np.ndarray, check: np.ndarray, alpha: float) -> tuple[int, int]:
        mask_fit, mask_check = usable[:, fit_on], usable[:, check]
        fit = ridge(hidden[:, fit_on][mask_fit], target[:, fit_on][mask_fit], alpha)
        right = np.sign(predict(fit, hidden[:, check][mask_check])) == target[:, check][mask_check]
        return int(right.sum()), int(mask_check.sum())

    right = total = 0
    for test in np.array_split(envs, folds):
        train = np.setdiff1d(envs, test)
        inner = np.array_split(train, max(2, min(folds - 1, len(train))))
        scores = [sum(accuracy(np.setdiff1d(train, c), c, a)[0] for c in inner) for a in ALPHAS]
        got, n = accuracy(train, test, ALPHAS[int(np.argmax(scores))])
        right, total = right + got, total + n
    share = float((target[usable] > 0).mean()) if usable.any() else float("nan")
    return {"side/accuracy": right / max(total, 1), "side/majority": max(share, 1 - share), "side/states": total}


def adam_fit(
    x: np.ndarray, y: np.ndarray, folds: int, input_mode: str, steps: int, lr: float, batch: int = 64
) -> float:
    """Held-out explained variance of a fresh ``input_mode`` head after ``steps`` Adam steps of ``batch`` states,
    pooled over ``folds`` folds of whole envs (as :func:`held_out_ev`)."""
    envs = np.arange(y.shape[1])
    predictions = np.zeros_like(y)
    for test in np.array_split(envs, folds):
        train = np.setdiff1d(envs, test)
        states = torch.tensor(x[:, train].reshape(-1, x.shape[2]), dtype=torch.float32)
        targets = torch.tensor(y[:, train].reshape(-1), dtype=torch.float32)
        torch.manual_seed(0)
        head = ValueHead(x.shape[2], input_mode=input_mode)
        # The run's start: weights ~ N(0, 1/H), bias 0 (the standardised head zeroes its weights, as a run does).
        torch.nn.init.normal_(head.weight, std=x.shape[2] ** -0.5)
        torch.nn.init.zeros_(head.bias)
        if input_mode == "standardized":
            torch.nn.init.zeros_(head.weight)
            with torch.no_grad(), head.observing():
                head(states)
            head.fold_observed()
        optimizer = torch.optim.Adam(head.parameters(), lr=lr)
        draws = torch.Generator().manual_seed(0)
        for _ in range(steps):
            index = torch.randint(0, len(states), (batch,), generator=draws)
            optimizer.zero_grad()
            (0.5 * (head(states[index]).squeeze(-1) - targets[index]).pow(2).mean()).backward()
            optimizer.step()
        with torch.no_grad():
            held = torch.tensor(x[:, test].reshape(-1, x.shape[2]), dtype=torch.float32)
            predictions[:, test] = head(held).squeeze(-1).numpy().reshape(y.shape[0], len(test))
    return explained_variance(y.reshape(-1), predictions.reshape(-1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=192)
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--updates", type=int, default=16, help="PPO updates whose head steps adam/* gets")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--save", type=Path, help="keep the recorded arrays here (npz)")
    parser.add_argument("--load", type=Path, help="read recorded arrays (npz) instead of playing")
    args = parser.parse_args(argv)
    record = json.loads((args.checkpoint.parent.parent / "config.json").read_text())["config"]
    data = dict(np.load(args.load)) if args.load else play(args.checkpoint, args.envs, args.steps, args.seed)
    if args.save:
        np.savez_compressed(args.save, **data)
    y, hidden = data["target"], data["hidden"]
    unit = hidden / np.linalg.norm(hidden, axis=-1, keepdims=True)
    report: dict[str, object] = {
        "checkpoint": str(args.checkpoint), "envs": y.shape[1], "steps": y.shape[0], "seed": args.seed,
        "target_mean": float(y.mean()), "target_std": float(y.std()),
        "head_value_mean": float(data["head"].mean()), "head_value_std": float(data["head"].std()),
        "ev/head": explained_variance(y.reshape(-1), data["head"].reshape(-1)),
        # How alike the states are to the head: the spread between states against the shared vector.
        "hidden_norm": float(np.linalg.norm(hidden, axis=-1).mean()),
        "hidden_spread_over_norm": float(np.linalg.norm(hidden - hidden.mean((0, 1)), axis=-1).mean()
                                         / np.linalg.norm(hidden, axis=-1).mean()),
    }  # fmt: skip
    for name, x in (("hidden", hidden), ("unit", unit), ("game", data["game"])):
        report[f"ev/ridge/{name}"], report[f"alpha/ridge/{name}"] = held_out_ev(x, y, args.folds)
    report |= held_out_side_accuracy(hidden, data["game"], args.folds)
    # PPO's optimizer steps per epoch and their size (agents/ppo_lora/update.py).
    samples = record["num_envs"] * record["num_steps"]
    per_epoch = max(1, min(record["max_minibatches"], math.ceil(samples / record["minibatch_size"])))
    steps, batch = args.updates * record["update_epochs"] * per_epoch, math.ceil(samples / per_epoch)
    report["adam_steps"], report["adam_batch"], report["adam_learning_rate"] = steps, batch, record["learning_rate"]
    for mode in INPUTS:
        report[f"ev/adam/{mode}"] = adam_fit(hidden, y, args.folds, mode, steps, record["learning_rate"], batch)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
