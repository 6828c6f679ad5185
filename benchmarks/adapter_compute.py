"""What running the LoRA products in the base model's dtype saves a training step: one batch's forward and backward
through the trainable layers with ``adapter_compute=auto`` (autocast; :mod:`llm_gym.lm.adapter_compute`) against
``adapter_compute=float32`` (peft's own float32 adapter), the same model, batches and LoRA initialisation in the same
run.

Two workloads, each an ``sft`` batch through ppo_lora's split forward (the path of PPO's update too):

* ``trace``: ``Trace-v0`` level 1 ground-truth demos (prompts of ~480 tokens, answers of ~70), LoRA on every layer:
  the long-sequence case of the Trace runs in docs/results/sft_trace.md.
* ``kuhn``: the learning demo's Kuhn poker demos of the best response, LoRA on the top 4 layers: short prompts.

With ``--sample-tokens N`` (``trace`` only) it also times generate mode's rollout: one batch's programs answered by
sampling N tokens through ``ppo_lora``'s ``GenerateMode`` (the whole model, the cached system prompt), at
temperature 1 from the same seed in both arms, and counts how many of the sampled tokens the two arms share.

Each round times both arms on the same batches, interleaved; the speedup is the median of the per-round ratios, so
load from other processes hits both alike. The first batch's losses and gradients from the two arms are compared too
(they differ by rounding only), beside the difference between the base model in its dtype and the whole model in
float32 on the same batch: the rounding the base dtype already brings. On a machine where ``dtype=auto`` resolves to float32 (no fast bfloat16) the two arms
are the same code and the ratio is ~1: the JSON says which dtype ran.

Prints JSON.

    python benchmarks/adapter_compute.py [--workload trace|kuhn] [--batches 3] [--batch-size 8] [--rounds 3]
        [--dtype auto] [--threads 0] [--sample-tokens 0]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from lm_args import lm_parser, parse_lm_args

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.decisions import Sampling
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.strategies import GenerateMode
from llm_gym.agents.sft.batches import Batches, accumulate
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.demos.format import read_demos
from llm_gym.demos.record import record_demos, trace_expected_stdout
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.cpu import cpu_name
from llm_gym.plugins import get_agent

WORKLOADS = {
    "trace": (EnvConfig("Trace-v0", {"level": 1}), {"action_mode": "generate", "max_new_tokens": 192,
                                                     "trainable_layers": 0}),
    "kuhn": (EnvConfig("OpenSpiel-kuhn_poker-v0"), {"trainable_layers": 4}),
}  # fmt: skip


def record(workload: str, env: EnvConfig, episodes: int, path: Path) -> None:
    if workload == "trace":
        record_demos(None, env, episodes, path, source={"agent": "ground_truth"}, ground_truth=trace_expected_stdout)
    else:
        record_demos(get_agent("best_response")().policy(env), env, episodes, path, source={"agent": "best_response"})


def arm(config: SFTConfig, env: EnvConfig, records: list[Any], batch_size: int) -> tuple[ActorCritic, Batches]:
    torch.manual_seed(0)  # the same LoRA and value-head initialisation in both arms
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(env).instructions)
    # peft starts B at zero, where the adapter adds nothing and the arms' losses agree trivially; a trained adapter's
    # B is not (std 0.01 here), so the comparison of losses and gradients means something.
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in ac.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.01)
    encoder = DemoEncoder(ac.builder, with_end=True)
    data = Batches(ac, [encoder.encode(r, r.return_to_go) for r in records], batch_size)
    ac.model.train()
    return ac, data


def step(ac: ActorCritic, data: Batches, index: list[int], config: SFTConfig) -> dict[str, float]:
    ac.model.zero_grad(set_to_none=True)
    ac.value_head.zero_grad(set_to_none=True)
    return accumulate(data, ac, index, config)


def timed(ac: ActorCritic, data: Batches, batches: list[list[int]], config: SFTConfig) -> float:
    start = time.perf_counter()
    for index in batches:
        step(ac, data, index, config)
    return time.perf_counter() - start


def sampled(ac: ActorCritic, observations: list[str], tokens: int) -> tuple[float, list[list[int]]]:
    """Seconds to sample ``tokens`` tokens for every observation as a generate-mode rollout does, and the tokens."""
    ac.model.eval()
    ac.config = replace(ac.config, max_new_tokens=tokens)
    ac.refresh()  # the full prefix with this adapter, made inside the timing as a rollout after an update makes it
    start = time.perf_counter()
    how = Sampling(greedy=False, generator=torch.Generator().manual_seed(0))
    _, continuations = GenerateMode().candidates(ac, ac.encode(observations), [{}] * len(observations), "", how)
    return time.perf_counter() - start, [row[0] for row in continuations]


def gradients(ac: ActorCritic) -> list[torch.Tensor]:
    return [p.grad.float().clone() for p in ac.trainable_parameters() if p.grad is not None]


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="trace")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--sample-tokens", type=int, default=0)
    args = parse_lm_args(parser)
    env, settings = WORKLOADS[args.workload]
    demos = args.batch_size * args.batches
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "demos.jsonl"
        record(args.workload, env, demos if args.workload == "trace" else 256, path)
        records = read_demos(path)
    configs = {
        mode: SFTConfig(model=args.model, demos=str(path), dtype=args.dtype, minibatch_size=args.batch_size,
                        micro_batch_size=args.batch_size, progress=False, adapter_compute=mode, **settings)
        for mode in ("float32", "auto")
    }  # fmt: skip
    arms = {mode: arm(config, env, records, args.batch_size) for mode, config in configs.items()}
    order = torch.randperm(len(records), generator=torch.Generator().manual_seed(0)).tolist()
    batches = [order[i : i + args.batch_size] for i in range(0, demos, args.batch_size)]

    first: dict[str, tuple[dict[str, float], list[torch.Tensor]]] = {}
    for mode, (ac, data) in arms.items():  # warm-up, and the first batch's losses and gradients
        first[mode] = step(ac, data, batches[0], configs[mode]), gradients(ac)
    # The yardstick for that rounding: the same batch on the whole model in float32 (the bf16 model's own rounding).
    exact_config = replace(configs["float32"], dtype="float32")
    exact, exact_data = arm(exact_config, env, records, args.batch_size)
    first["float32 model"] = step(exact, exact_data, batches[0], exact_config), gradients(exact)
    del exact, exact_data

    def difference(a: str, b: str) -> dict[str, float]:
        (loss_a, grad_a), (loss_b, grad_b) = first[a], first[b]
        relative = [float((x - y).norm() / y.norm().clamp_min(1e-12)) for x, y in zip(grad_a, grad_b, strict=True)]
        return {"loss": abs(loss_a["train/loss"] - loss_b["train/loss"]),
                "answer_loss": abs(loss_a["train/answer_loss"] - loss_b["train/answer_loss"]),
                "gradient_relative_median": statistics.median(relative), "gradient_relative_max": max(relative)}  # fmt: skip

    seconds: dict[str, list[float]] = {"float32": [], "auto": []}
    ratios = []
    for _ in range(args.rounds):
        for mode, (ac, data) in arms.items():
            seconds[mode].append(timed(ac, data, batches, configs[mode]))
        ratios.append(seconds["float32"][-1] / seconds["auto"][-1])
    sampling = {}
    if args.sample_tokens and args.workload == "trace":
        observations = [records[i].messages[1]["content"] for i in batches[0]]
        sample_s: dict[str, list[float]] = {"float32": [], "auto": []}
        samples = {}
        for _ in range(args.rounds):
            for mode, (ac, _) in arms.items():
                seconds_taken, samples[mode] = sampled(ac, observations, args.sample_tokens)
                sample_s[mode].append(seconds_taken)
        shared = sum(
            next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            for a, b in zip(samples["auto"], samples["float32"], strict=True)
        )
        sampling = {
            "sample_tokens": args.sample_tokens, "sample_rows": len(observations),
            "sample_s_float32": statistics.median(sample_s["float32"]), "sample_s_auto": statistics.median(sample_s["auto"]),
            "sample_speedup_per_round": [a / b for a, b in zip(sample_s["float32"], sample_s["auto"], strict=True)],
            "sampled_tokens_total": sum(len(t) for t in samples["float32"]),
            "sampled_tokens_shared_prefix": shared,
        }  # fmt: skip
        sampling["sample_speedup_auto_vs_float32"] = statistics.median(sampling["sample_speedup_per_round"])
    ac, data = arms["auto"]
    tokens = [len(data.parts[i][0]) + len(data.parts[i][1]) for index in batches for i in index]
    print(json.dumps({
        "workload": args.workload, "env": env.env_id, "model": args.model, "dtype": str(ac.split.dtype),
        "adapter_compute_active": ac.split.adapter_compute.active, "cpu": cpu_name(),
        "threads": torch.get_num_threads(), "batch_size": args.batch_size, "batches": args.batches,
        "trainable_layers": settings["trainable_layers"], "mean_tokens_per_demo": statistics.mean(tokens),
        "batch_s_float32": statistics.median(seconds["float32"]) / args.batches,
        "batch_s_auto": statistics.median(seconds["auto"]) / args.batches,
        "speedup_auto_vs_float32": statistics.median(ratios), "speedup_per_round": ratios,
        "first_batch_loss": {mode: losses["train/loss"] for mode, (losses, _) in first.items()},
        "first_batch_difference_auto_vs_float32_adapter": difference("auto", "float32"),
        "first_batch_difference_bf16_model_vs_float32_model": difference("float32", "float32 model"),
        **sampling,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
