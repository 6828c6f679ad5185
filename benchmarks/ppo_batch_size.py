"""How far one ppo_lora update moves the policy at 8, 16 and 64 envs, for three update structures: ``before`` (per-
minibatch advantage normalisation, one optimizer step per 64 decisions, so 4x the steps at 4x the envs),
``fixed_steps`` (advantages normalised over the rollout, exactly 4 steps per epoch at any rollout size: small
rollouts get small, noisy steps) and ``after`` (the defaults: rollout normalisation, steps of 64 decisions but at most
``max_minibatches`` = 4 per epoch).

    python benchmarks/ppo_batch_size.py                          # default model, OpenSpiel-tic_tac_toe-v0 vs random
    python benchmarks/ppo_batch_size.py --model /tmp/tiny --num-steps 4 --seeds 0   # a mechanics check

One real rollout of the largest env count is collected once with the untrained adapter (cached with --cache); the
8- and 16-env batches are its first 8 and 16 envs, so every batch size sees the same kind of states. From the same
starting adapter, each (batch size, update, seed of the minibatch order) runs one PPO update with the settings of
the Breakout run in docs/results/ppo_lora_breakout.md (lr 1e-3, entropy 0.05, no KL, 2 epochs) and measures, on all the rollout's
states: the mean KL(before || after) of the policy over the legal actions, the fraction of states whose greedy action
changed, and the policy's entropy after. Prints one JSON object; ``ratio_64_to_8`` compares batch sizes within the
run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.decisions import Decisions
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout, RolloutActor, collect
from llm_gym.agents.ppo_lora.strategies import strategy_for
from llm_gym.agents.ppo_lora.update import _flatten, ppo_update, stored_batch
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.runtime import configure_threads
from llm_gym.lm.scoring import categorical_logprobs
from llm_gym.rl import compute_gae
from llm_gym.stepping import EnvStepper, make_vector_env

DOCS_RUN = dict(learning_rate=1e-3, entropy_coef=0.05, kl_coef=0.0, update_epochs=2, minibatch_size=64)
"""The PPO settings of the Breakout run in docs/results/ppo_lora_breakout.md whose greedy policy collapsed."""


def variants(rollout_size: int) -> dict[str, dict[str, Any]]:
    """The update before this change and two after it, as the config can ask for them."""
    return {
        "before": dict(advantage_norm="minibatch", max_minibatches=math.ceil(rollout_size / 64)),
        "fixed_steps": dict(advantage_norm="rollout", max_minibatches=4, minibatch_size=math.ceil(rollout_size / 4)),
        "after": dict(advantage_norm="rollout", max_minibatches=4),
    }


def first_envs(rollout: Rollout, n: int, steps: int, last_value: torch.Tensor) -> Rollout:
    """The first ``steps`` steps of envs 0..n-1 only (``last_value``: V of the state after them, for GAE)."""
    sub = Rollout(finished=rollout.finished, invalid=rollout.invalid, raw_reward=rollout.raw_reward)
    for d in rollout.decisions[:steps]:
        sub.decisions.append(Decisions(**{f.name: getattr(d, f.name)[:n] for f in dataclasses.fields(d)}))
    sub.rewards = [r[:n] for r in rollout.rewards[:steps]]
    sub.dones = [r[:n] for r in rollout.dones[:steps]]
    sub.truncated_values = [r[:n] for r in rollout.truncated_values[:steps]]
    after = rollout.dones[steps] if steps < len(rollout.dones) else rollout.last_done
    sub.last_value, sub.last_done = last_value[:n], after[:n]
    return sub


def policy_logprobs(ac: ActorCritic, flat: dict[str, list]) -> list[torch.Tensor]:
    """log pi over each stored state's legal actions, with the current adapter."""
    out = []
    for start in range(0, len(flat["prompts"]), 64):
        index = list(range(start, min(start + 64, len(flat["prompts"]))))
        batch, hidden = stored_batch(ac, flat, index)
        result, _ = ac.top(hidden, batch, "rollout")
        logp = categorical_logprobs(result.seq_logprobs, batch.seq_row, len(index)).cpu()
        out += [logp[row, : len(flat["continuations"][i])] for row, i in enumerate(index)]
    return out


def drift(before: list[torch.Tensor], after: list[torch.Tensor]) -> dict[str, float]:
    kl = [float((b.exp() * (b - a)).sum()) for b, a in zip(before, after, strict=True)]
    flips = [int(b.argmax() != a.argmax()) for b, a in zip(before, after, strict=True)]
    entropy = [float(-(a.exp() * a).sum()) for a in after]
    return {
        "kl_before_after": sum(kl) / len(kl),
        "greedy_flip_fraction": sum(flips) / len(flips),
        "entropy_after": sum(entropy) / len(entropy),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="OpenSpiel-tic_tac_toe-v0")
    parser.add_argument("--envs", default="8,16,64", help="env counts; the largest is collected")
    parser.add_argument("--num-steps", type=int, default=8)
    parser.add_argument("--trainable-layers", type=int, default=4)
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the minibatch order")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=None, help="save / reuse the collected rollout here")
    parser.add_argument("--use-steps", type=int, default=0, help="use the first N steps of the rollout (0: all)")
    parser.add_argument("--measure-envs", type=int, default=0, help="measure drift on these first envs (0: all)")
    args = parser.parse_args()
    env_counts = sorted(int(n) for n in args.envs.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    base = PPOLoRAConfig(
        model=args.model, num_envs=env_counts[-1], num_steps=args.num_steps, trainable_layers=args.trainable_layers,
        threads=args.threads, progress=False, advantage="gae", policy_loss="clip", **DOCS_RUN,
    )  # fmt: skip
    configure_threads(base.threads)
    torch.manual_seed(0)
    env = EnvConfig(args.env)
    traits = EnvTraits.probe(env)
    strategy = strategy_for(base)
    ac = ActorCritic(base, traits.instructions)
    start_state = {k: v.detach().clone() for k, v in ac.model.named_parameters() if v.requires_grad}
    start_value = {k: v.detach().clone() for k, v in ac.value_head.state_dict().items()}

    started = time.perf_counter()
    if args.cache is not None and args.cache.is_file():
        rollout = torch.load(args.cache, weights_only=False)  # our own cache file, written below
    else:
        stepper = EnvStepper(make_vector_env(env, base.num_envs), seed=0)
        stepper.reset()
        generator = torch.Generator().manual_seed(0)
        rollout = collect(RolloutActor(ac, strategy, generator), stepper, base, env.env_id, torch.zeros(base.num_envs))
        stepper.close()
        if args.cache is not None:
            torch.save(rollout, args.cache)
    collect_seconds = time.perf_counter() - started
    steps = args.use_steps or len(rollout.decisions)
    # V(s) of the state after the steps used: the stored value of the next step (the rollout's last value at the end).
    next_value = rollout.decisions[steps].values if steps < len(rollout.decisions) else rollout.last_value
    base = dataclasses.replace(base, num_steps=steps)
    full = _flatten(first_envs(rollout, args.measure_envs or env_counts[-1], steps, next_value))
    start_logprobs = policy_logprobs(ac, full)

    results: list[dict[str, Any]] = []
    for n in env_counts:
        sub = first_envs(rollout, n, steps, next_value)
        arrays = sub.stacked()
        advantages, returns = compute_gae(
            arrays["rewards"], arrays["values"], arrays["dones"], sub.last_value, sub.last_done, base.gamma,
            base.gae_lambda, arrays["truncated_values"],
        )  # fmt: skip
        for name, overrides in variants(n * base.num_steps).items():
            config = dataclasses.replace(base, num_envs=n, **overrides)
            for seed in seeds:
                with torch.no_grad():
                    for key, value in ac.model.named_parameters():
                        if key in start_state:
                            value.copy_(start_state[key])
                    ac.value_head.load_state_dict(start_value)
                ac.refresh()
                optimizer = torch.optim.AdamW(ac.trainable_parameters(), lr=config.peak_learning_rate, weight_decay=0.0)
                tick = time.perf_counter()
                metrics = ppo_update(
                    ac, strategy, optimizer, sub, advantages, returns, config, torch.Generator().manual_seed(seed), 0.0
                )
                row = {"num_envs": n, "update": name, "seed": seed, "decisions": n * base.num_steps}
                per_epoch = min(config.max_minibatches, math.ceil(n * base.num_steps / config.minibatch_size))
                row |= {"optimizer_steps": per_epoch * int(metrics["epochs"])}
                row |= {k: metrics[k] for k in ("approx_kl", "clip_fraction", "entropy", "grad_norm")}
                row |= drift(start_logprobs, policy_logprobs(ac, full))
                row["seconds"] = time.perf_counter() - tick
                results.append(row)
                print(json.dumps(row), flush=True)

    summary: dict[str, Any] = {}
    for name in variants(1):
        for key in ("kl_before_after", "greedy_flip_fraction"):
            by_n = {
                n: sum(r[key] for r in results if r["num_envs"] == n and r["update"] == name) / len(seeds)
                for n in env_counts
            }
            summary[f"{name}_{key}"] = by_n
            summary[f"{name}_{key}_ratio_{env_counts[-1]}_to_{env_counts[0]}"] = by_n[env_counts[-1]] / max(
                by_n[env_counts[0]], 1e-12
            )
    rewards = torch.stack(rollout.rewards[:steps])
    print(
        json.dumps(
            {
                "benchmark": "ppo_batch_size",
                "model": args.model,
                "env": args.env,
                "num_steps": base.num_steps,
                "trainable_layers": base.trainable_layers,
                "settings": DOCS_RUN,
                "rollout": {
                    "decisions": steps * env_counts[-1],
                    "measured_on": len(full["prompts"]),
                    "nonzero_rewards": int((rewards != 0).sum()),
                    "collected_steps": len(rollout.decisions),
                    "collect_seconds": collect_seconds,
                },
                "machine": platform.processor() or platform.machine(),
                "summary": summary,
                "rows": results,
            }
        )
    )


if __name__ == "__main__":
    main()
