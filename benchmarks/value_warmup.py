"""How well one ppo_lora value warm-up update (``value_warmup_updates``) fits the value head, by passes and learning
rate: the explained variance of the returns of the rollout it fitted and of the *next* rollout (held out), against
the head it started from and against the least-squares head on the same features (the best any linear head can do).

    python benchmarks/value_warmup.py                     # default model, LLMBreakout-text-v0, shaping 10
    python benchmarks/value_warmup.py --model /tmp/tiny --num-envs 2 --num-steps 8 --epochs 1,4   # mechanics check

Two consecutive rollouts of the zero-shot policy (a fresh adapter and value head, the settings of the Breakout runs
in docs/results/ppo_lora_breakout.md: ``reward_shaping=10``, ``reward_scale=0.1``, top 4 layers), their GAE returns with the starting
head's values. For each (learning rate, passes), from the same starting head: one ``value_warmup_update`` on the
first rollout (the training loop's code), then explained variance on both. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import strategy_for
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout, RolloutActor, collect
from llm_gym.agents.ppo_lora.update import _flatten, value_features, value_warmup_update
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.runtime import configure_threads
from llm_gym.rl import compute_gae, explained_variance
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.loop import training_env


def returns_of(rollout: Rollout, config: PPOLoRAConfig) -> torch.Tensor:
    arrays = rollout.stacked()
    _, returns = compute_gae(
        arrays["rewards"], arrays["values"], arrays["dones"], rollout.last_value, rollout.last_done, config.gamma,
        config.gae_lambda, arrays["truncated_values"],
    )  # fmt: skip
    return returns.flatten()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="LLMBreakout-text-v0")
    parser.add_argument("--reward-shaping", type=float, default=10.0)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--trainable-layers", type=int, default=4)
    parser.add_argument("--epochs", default="2,8,32,128", help="passes over the rollout per warm-up update")
    parser.add_argument("--lrs", default="2e-4,1e-3,5e-3", help="learning rates")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    config = PPOLoRAConfig(
        model=args.model, num_envs=args.num_envs, num_steps=args.num_steps, trainable_layers=args.trainable_layers,
        reward_scale=0.1, kl_coef=0.0, threads=args.threads, progress=False, advantage="gae", policy_loss="clip",
    )  # fmt: skip
    configure_threads(config.threads)
    torch.manual_seed(0)
    kwargs = {"reward_shaping": args.reward_shaping} if args.env.startswith("LLMBreakout") else {}
    env = training_env(EnvConfig(args.env, kwargs))  # FIRE on reset, life-loss episode ends: what PPO trains on
    ac = ActorCritic(config, EnvTraits.probe(env).instructions)
    strategy = strategy_for(config)
    start_head = {k: v.detach().clone() for k, v in ac.value_head.state_dict().items()}

    started = time.perf_counter()
    stepper = EnvStepper(make_vector_env(env, config.num_envs), seed=0)
    stepper.reset()
    generator, done = torch.Generator().manual_seed(0), torch.zeros(config.num_envs)
    rollouts = []
    for _ in range(2):
        rollout = collect(RolloutActor(ac, strategy, generator), stepper, config, env.env_id, done)
        done = rollout.last_done
        rollouts.append(rollout)
    stepper.close()
    collect_seconds = time.perf_counter() - started
    fitted, held_out = rollouts
    flat = [_flatten(r) for r in rollouts]
    features = [value_features(ac, f, config.minibatch_size) for f in flat]
    targets = [returns_of(r, config) for r in rollouts]

    def evs() -> dict[str, float]:
        with torch.no_grad():
            return {
                name: explained_variance(ac.value_head(x).squeeze(-1).cpu(), y)
                for name, x, y in zip(("fitted", "held_out"), features, targets, strict=True)
            }

    rows: list[dict[str, Any]] = [{"head": "start", **evs()}]
    for lr in (float(x) for x in args.lrs.split(",")):
        for epochs in (int(x) for x in args.epochs.split(",")):
            ac.value_head.load_state_dict(start_head)
            tick = time.perf_counter()
            settings = dataclasses.replace(config, value_warmup_epochs=epochs, value_warmup_learning_rate=lr)
            value_warmup_update(ac, fitted, targets[0], settings, torch.Generator().manual_seed(0))
            row = {"head": "warm-up", "learning_rate": lr, "epochs": epochs, **evs()}
            row["seconds"] = time.perf_counter() - tick
            rows.append(row)
            print(json.dumps(row), flush=True)
    # The least-squares head on the fitted rollout's features (a small ridge term: fewer samples than features).
    x = torch.cat([features[0].cpu().double(), torch.ones(len(features[0]), 1, dtype=torch.float64)], dim=1)
    w = torch.linalg.solve(x.T @ x + 1e-3 * torch.eye(x.shape[1], dtype=torch.float64), x.T @ targets[0].double())
    with torch.no_grad():
        ac.value_head.weight.copy_(w[:-1].float()[None].to(ac.value_head.weight.device))
        ac.value_head.bias.copy_(w[-1:].float().to(ac.value_head.bias.device))
    rows.append({"head": "least squares (ridge 1e-3)", **evs()})
    rewards = torch.stack(fitted.rewards)
    print(
        json.dumps(
            {
                "benchmark": "value_warmup",
                "model": args.model,
                "env": env.env_id,
                "env_kwargs": env.kwargs,
                "rollout": {
                    "decisions": config.rollout_size,
                    "nonzero_rewards": int((rewards != 0).sum()),
                    "return_std": [float(t.std()) for t in targets],
                    "collect_seconds": collect_seconds,
                },
                "machine": platform.processor() or platform.machine(),
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
