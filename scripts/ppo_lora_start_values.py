"""Where a fresh ppo_lora value head starts, per seed: the values it gives the zero-shot policy's states.

A run builds its LoRA and value head right after ``torch.manual_seed(init_seed or seed)``; this builds them the
same way for each seed (the run's own draws: the same code, the same order) and scores one fixed set of states,
the zero-shot policy's first rollout on ``--env`` (seed 0). It prints, per seed, the head's mean value and its
spread over the states, and the hidden state the head reads: its norm, its largest channel and the spread between
states (docs/ppo_lora_breakout_critic.md, "A fresh value head's starting value").

    python scripts/ppo_lora_start_values.py --seeds 0-9                          # the Breakout runs' setting
    python scripts/ppo_lora_start_values.py --seeds 0-9 --set value_input=unit
    python scripts/ppo_lora_start_values.py --model /tmp/tiny --seeds 0,1 --num-envs 2 --num-steps 2   # mechanics
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import strategy_for
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import collect
from llm_gym.agents.ppo_lora.update import _flatten, value_features
from llm_gym.config import apply_overrides, parse_assignments
from llm_gym.envs.protocol import EnvTraits
from llm_gym.lm.runtime import configure_threads
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.sweeps.grid import parse_seeds
from llm_gym.training import training_env


def starting_values(base: PPOLoRAConfig, env: EnvConfig, seeds: list[int]) -> tuple[list[dict], torch.Tensor]:
    """Per seed, the mean and spread of a fresh value head's values (``base`` with that seed) on the zero-shot
    policy's first rollout, and the hidden states it read (one row per decision)."""
    env = training_env(env)  # FIRE on reset and life-loss episode ends, as a training run has them
    instructions = EnvTraits.probe(env).instructions
    states = None
    rows = []
    for seed in seeds:
        config = apply_overrides(base, {"seed": seed})
        torch.manual_seed(config.starting_seed)  # what train() does before it builds the model
        ac = ActorCritic(config, instructions)
        if states is None:  # the first seed's zero-shot rollout: a fresh LoRA is the base model for every seed
            stepper = EnvStepper(make_vector_env(env, config.num_envs), seed=0)
            stepper.reset()
            rollout = collect(ac, strategy_for(config), stepper, config, env.env_id, torch.Generator().manual_seed(0),
                              torch.zeros(config.num_envs), False)  # fmt: skip
            stepper.close()
            states = value_features(ac, _flatten(rollout), config.minibatch_size).cpu()
        with torch.no_grad():
            values = ac.value_head(states.to(ac.device)).squeeze(-1).cpu()
        rows.append({"seed": seed, "value_mean": float(values.mean()), "value_std": float(values.std())})
        print(f"seed {seed}: value {rows[-1]['value_mean']:+.3f} ± {rows[-1]['value_std']:.3f}", flush=True)
    assert states is not None, "no seeds"
    return rows, states


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-9", help="seeds (as llm-gym sweep takes them: 0-9 or 0,3,9)")
    parser.add_argument("--env", default="LLMBreakout-text-v0")
    parser.add_argument("--reward-shaping", type=float, default=10.0, help="Breakout's shaping (the runs' 10)")
    parser.add_argument("--model", default=None, help="model (default: the agent's)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=8)
    parser.add_argument("--set", action="append", default=[], help="ppo_lora settings, KEY=VALUE (repeatable)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    # The Breakout runs' shape (docs/ppo_lora_breakout.md): top 4 layers, bfloat16 where the CPU has it.
    settings = {"trainable_layers": 4, "dtype": "auto", "adapter_compute": "float32", "threads": 1, "progress": False}
    settings |= {"model": args.model} if args.model else {}
    settings |= {"num_envs": args.num_envs, "num_steps": args.num_steps} | parse_assignments(args.set)
    base = apply_overrides(PPOLoRAConfig(), settings)
    configure_threads(base.threads)
    kwargs = {"reward_shaping": args.reward_shaping} if args.env.startswith("LLMBreakout") else {}
    rows, states = starting_values(base, EnvConfig(args.env, kwargs), parse_seeds(args.seeds))
    shared = states.mean(0)
    report = {
        "env": args.env,
        "env_kwargs": kwargs,
        "settings": settings,
        "states": len(states),
        "hidden": {
            "norm": float(states.norm(dim=1).mean()),
            "largest_channel": float(shared.abs().max()),
            "spread_between_states_rms": float((states - shared).pow(2).mean().sqrt()),
            "rms": float(states.pow(2).mean().sqrt()),
        },
        "seeds": rows,
    }
    print(json.dumps(report["hidden"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
