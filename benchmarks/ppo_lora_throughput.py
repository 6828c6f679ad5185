"""ppo_lora's training loop against greedy play of the same model at the same batch, in the same run: env steps per
second of training (rollouts and updates) over decisions per second of ``llm-gym play``'s path (the LM policy's
score mode through the hf backend, greedy), for each advantage estimator, on Kuhn poker and tic-tac-toe. The goal
(issue 87): training at >= 0.5x play, the update costing no more than the rollout.

Also what merging identical prompts saves (a group's first observation, any position many envs show at once): the
rollout's decisions per second with rows merged and with every row run on its own.

Two settings per game: ``defaults`` (the config's defaults at ``--num-envs`` x ``--num-steps``) and ``recipe`` (the
game's ``ppo_lora`` preset, the recipe behind its leaderboard entries: ``kuhn-poker``, ``tic-tac-toe``), each with
both estimators (the recipe's ``gae`` arm is the preset with ``advantage=gae``, as the leaderboard's gae entries).

Each training run takes ``--updates`` updates; its first update (the model's first passes, kernel set-up) is left
out of the rate, which is the median over the rest. Play plays ``--play-episodes`` episodes after a warm-up batch.
Prints JSON (and writes it with ``--out``). Load from other processes slows everything measured alike only where it
is steady: run it on an idle machine, and say the load beside the numbers.

    python benchmarks/ppo_lora_throughput.py [--games kuhn_poker,tic_tac_toe] [--num-envs 32] [--updates 5]
        [--settings defaults,recipe] [--model smollm2-135m] [--threads 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent, strategies
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.config import apply_overrides, to_dict
from llm_gym.lm.cpu import cpu_description
from llm_gym.plugins import get_agent
from llm_gym.runs import Run
from llm_gym.training.curves import read_scalars
from llm_gym.training.evaluation import run_episodes


def play_rate(env: EnvConfig, model: str, num_envs: int, episodes: int, threads: int) -> float:
    """Greedy score-mode decisions per second of the LM policy (``llm-gym play --agent lm``) at ``num_envs``."""
    agent = get_agent("lm")
    policy = agent(agent.Config(model=model, action_mode="score", threads=threads)).policy(env)
    run_episodes(policy, env, num_envs, seed=1, num_envs=num_envs)  # warm-up: first passes, kernel set-up
    started = time.perf_counter()
    results = run_episodes(policy, env, episodes, seed=100, num_envs=num_envs)
    return sum(r.length for r in results) / (time.perf_counter() - started)


def training_rates(config: PPOLoRAConfig, env: EnvConfig, merge: bool = True) -> dict[str, float]:
    """Env steps per second of a training run (median over its updates but the first) and of its rollouts alone."""
    strategies.ScoreMode.merges_identical = merge
    try:
        with tempfile.TemporaryDirectory() as root:
            run = Run.create(env.env_id, "ppo_lora", to_dict(config), path=Path(root) / "run")
            try:
                PPOLoRAAgent(config).train(env, run)
            finally:
                run.close()
            scalars = read_scalars(Path(root) / "run")
    finally:
        strategies.ScoreMode.merges_identical = True
    sps, rollout = scalars["charts/sps"][1][1:], scalars["charts/decisions_per_second"][1][1:]
    update = scalars["charts/update_seconds"][1][1:]
    return {
        "env_steps_per_second": float(statistics.median(sps)),
        "rollout_decisions_per_second": float(statistics.median(rollout)),
        "update_seconds": float(statistics.median(update)),
        "updates_measured": len(sps),
    }


RECIPES = {"kuhn_poker": "kuhn-poker", "tic_tac_toe": "tic-tac-toe"}
"""Each game's preset: the recipe of its leaderboard entries."""

SHOWN = ("advantage", "policy_loss", "learning_rate", "num_envs", "group_size", "num_steps", "trainable_layers",
         "update_epochs", "kl_coef", "minibatch_size", "max_minibatches")  # fmt: skip
"""The settings the JSON repeats beside each rate (what the update's cost depends on)."""


def training_config(settings: str, game: str, estimator: str, args: argparse.Namespace) -> PPOLoRAConfig:
    """``defaults``: the config's defaults at the benchmark's batch; ``recipe``: the game's preset. Either way the
    run lasts ``--updates`` updates and plays no evaluation, at ``--threads`` with ``--model``."""
    base: dict[str, Any] = {}
    if settings == "recipe":
        base = dict(get_agent("ppo_lora").presets()[RECIPES[game]].config)
    elif settings != "defaults":
        raise SystemExit(f"--settings: unknown {settings!r}; use defaults, recipe or both")
    else:
        base = dict(num_envs=args.num_envs, group_size=args.group_size, num_steps=args.num_steps)
    base |= dict(advantage=estimator, model=args.model, threads=args.threads, eval_episodes=0, eval_exact=False,
                 eval_every=0, progress=False, checkpoint_every=10**9, video=False)  # fmt: skip
    config = apply_overrides(PPOLoRAConfig(), base, source=f"{settings} {estimator}")
    return apply_overrides(config, {"total_steps": args.updates * config.rollout_size})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="kuhn_poker,tic_tac_toe")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=8, help="Decisions per env per rollout (group: at least).")
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--play-episodes", type=int, default=128)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--settings", default="defaults,recipe", help="defaults, recipe (the game's preset), or both")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": cpu_description() | {"load_before": os.getloadavg()[0], "torch": torch.__version__},
        "settings": vars(args) | {"out": str(args.out) if args.out else None},
        "games": {},
    }
    for game in args.games.split(","):
        env = EnvConfig(f"OpenSpiel-{game}-v0")
        play = play_rate(env, args.model, args.num_envs, args.play_episodes, args.threads)
        row: dict[str, Any] = {"play_decisions_per_second": play}
        for settings in args.settings.split(","):
            row[settings] = {}
            for estimator in ("group", "gae"):
                config = training_config(settings, game, estimator, args)
                rates = training_rates(config, env)
                rates["training_over_play"] = rates["env_steps_per_second"] / play
                if estimator == "group" and settings == "defaults":
                    unmerged = training_rates(config, env, merge=False)
                    rates["unmerged"] = unmerged
                    rates["merging_rollout_speedup"] = (
                        rates["rollout_decisions_per_second"] / unmerged["rollout_decisions_per_second"]
                    )
                    rates["merging_training_speedup"] = rates["env_steps_per_second"] / unmerged["env_steps_per_second"]
                rates["settings"] = {k: v for k, v in to_dict(config).items() if k in SHOWN}
                row[settings][estimator] = rates
        results["games"][game] = row
    results["machine"]["load_after"] = os.getloadavg()[0]
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
