"""What multi-turn history (``history=K``) costs ``ppo_lora`` per decision: prompt tokens, the share of them served by
the cached system-prompt prefix, and rollout decisions/s of :func:`llm_gym.agents.ppo_lora.acting.act` (score mode)
at K = 0 against K = 2 and 4, with the same model, envs and states in the same run.

Prints JSON. The states are real LLMBreakout-text-v0 states a few steps into episodes (played by the scripted
tracker, so each env's turns are full); each round times every K once, interleaved, and every ratio is the median of
per-round ratios, so load from other processes on a shared machine hits all of them alike.

    python benchmarks/history_prompt_cost.py [--model smollm2-135m] [--envs 8] [--rounds 3] [--threads 0]
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np
import torch
from lm_args import lm_parser, parse_lm_args

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.envs.catalog import EnvTraits
from llm_gym.stepping import EnvStepper, make_vector_env

ENV = "LLMBreakout-text-v0"
HISTORIES = (0, 2, 4)


def states(history: int, envs: int, steps: int) -> tuple[list, list]:
    """Observations and infos of ``envs`` Breakout games after ``steps`` tracker moves, with ``history`` turns."""
    config = EnvConfig(ENV, {"history": history, "fire_on_reset": True} if history else {"fire_on_reset": True})
    stepper = EnvStepper(make_vector_env(config, envs, text_actions=False), seed=0)
    stepper.reset()
    tracker = ScriptedPolicy(config)
    for _ in range(steps):
        stepper.step(tracker.act(stepper.observations, stepper.infos))
    observations, infos = list(stepper.observations), list(stepper.infos)
    stepper.close()
    return observations, infos


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--envs", type=int, default=8)
    args = parse_lm_args(parser)
    config = PPOLoRAConfig(model=args.model, dtype="auto", trainable_layers=4, progress=False)
    ac = ActorCritic(config, EnvTraits.probe(EnvConfig(ENV)).instructions)
    strategy = strategy_for(config)
    batches = {k: states(k, args.envs, steps=6) for k in HISTORIES}
    generator = torch.Generator().manual_seed(0)

    def decide(k: int):
        return act(ac, strategy, *batches[k], ENV, generator=generator, keep_hidden=False)

    prompts = {k: decide(k) for k in HISTORIES}  # warm-up, and the prompts measured below
    rounds: list[dict[int, float]] = []
    for _ in range(args.rounds):
        row = {}
        for k in HISTORIES:
            start = time.perf_counter()
            with torch.no_grad():
                decide(k)
            row[k] = time.perf_counter() - start
        rounds.append(row)

    prefix = len(ac.builder.prefix_ids)
    report: dict[str, object] = {
        "model": args.model,
        "env": ENV,
        "envs": args.envs,
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "load_average_1min": os.getloadavg()[0],
        "reference": "history=0 (single-turn prompts), same envs after the same moves, same run",
        "cached_prefix_tokens": prefix,
    }
    for k in HISTORIES:
        decisions = prompts[k]
        tokens = float(np.mean([len(ids) for ids in decisions.prompts]))
        report[f"history={k}"] = {
            "mean_prompt_tokens": tokens,
            "prompts_using_the_cached_prefix": float(np.mean(decisions.uses_prefix)),
            "share_of_prompt_tokens_cached": prefix / tokens,
            "decisions_per_s": statistics.median(args.envs / r[k] for r in rounds),
            "time_ratio_to_history_0": statistics.median(r[k] / r[0] for r in rounds),
            "prompt_token_ratio_to_history_0": tokens / float(np.mean([len(i) for i in prompts[0].prompts])),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
