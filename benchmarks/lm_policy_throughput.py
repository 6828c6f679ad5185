"""Decisions/s of the LM policy's score mode at N = 1, 8, 32 envs against a naive per-env ``generate`` of 10 tokens
per decision, with the same model in the same run, and the fraction of the machine's matmul FLOP bound reached.

Prints JSON. Observations are real LLMBreakout-text-v0 states. Score mode = ``HFBackend.score`` (one packed forward
over the cached system-prompt prefix per batch). Naive = for each env, ``model.generate(full prompt,
max_new_tokens=10, do_sample=True)`` then the shared parser, the way the seeds decide. Score batches, naive
decisions and a matmul probe run in interleaved rounds and every ratio is the median of per-round ratios, so load
from other processes on a shared machine hits all of them alike. Rates are given per wall second and per CPU
second of this process.

Axes: ``--device`` (cpu, or cuda when visible: the default picks cuda there) and ``--backend vllm``, which adds the
same score batches and a batched generate of 10 tokens through the vllm backend and the hf backend in every round
(:mod:`lm_backend_axis`; vLLM's CPU time includes its worker processes).

    python benchmarks/lm_policy_throughput.py [--model smollm2-135m] [--dtype auto] [--rounds 3] [--threads 0]
        [--device auto] [--backend hf|vllm]
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time

import gymnasium as gym
import numpy as np
import torch
from lm_args import lm_parser

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.actions import parse_action
from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.lm.backends import ScoreRequest
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.packing import pack
from llm_gym.lm.runtime import default_device

ENV = "LLMBreakout-text-v0"
SIZES = (1, 8, 32)


def observations(count: int) -> tuple[list[str], list[dict], str]:
    """``count`` distinct game states: the scripted tracker with some random actions mixed in."""
    env, rng = gym.make(ENV), np.random.default_rng(0)
    scripted = ScriptedPolicy(EnvConfig(ENV))
    obs, info = env.reset(seed=0)
    states, infos = [], []
    while len(states) < count:
        action = scripted.act([obs], [info])[0] if rng.random() < 0.7 else int(rng.integers(4))
        obs, _, terminated, truncated, info = env.step(action)
        if rng.random() < 0.3:
            states.append(obs)
            infos.append(info)
        if terminated or truncated:
            obs, info = env.reset()
    return states, infos, env.unwrapped.instructions


def timed(function) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def matmul_probe(dtype: torch.dtype, device: str = "cpu", size: int = 2048, repeats: int = 4) -> tuple[float, float]:
    """(wall, cpu) seconds for ``repeats`` square matmuls; the FLOP bound is 2 n^3 repeats / seconds."""
    a, b = (torch.randn(size, size, dtype=dtype, device=device) for _ in range(2))
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    a @ b
    sync()
    wall, cpu, _ = timed(lambda: ([a @ b for _ in range(repeats)], sync()))
    return wall, cpu


def score_flops(backend: HFBackend, requests: list[ScoreRequest]) -> float:
    """FLOPs of the packed forward a score call runs (padding included: it is computed)."""
    config = backend.model.config
    builder, prefix = backend.prompt_builder(requests[0].instructions)
    prompts = builder.encode([r.observation for r in requests])
    choices = [[builder.choice_ids(c) for c in r.choices] for r in requests]
    batch = pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], choices, prefix.length, 0)
    rows, width = batch.input_ids.shape
    embedding = config.vocab_size * config.hidden_size
    body = sum(p.numel() for p in backend.model.parameters()) - embedding * (1 if config.tie_word_embeddings else 2)
    head_dim = config.hidden_size // config.num_attention_heads
    attention = (
        4 * config.num_hidden_layers * rows * width * (prefix.length + width) * config.num_attention_heads * head_dim
    )
    return 2.0 * body * rows * width + attention + 2.0 * embedding * len(batch.predict_row)


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--naive-decisions", type=int, default=2, help="naive decisions per round")
    parser.add_argument("--device", default="auto", help="auto (cuda when visible, else cpu), cpu, cuda")
    parser.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="vllm: add the backend axis")
    args = parser.parse_args()
    device = default_device() if args.device == "auto" else args.device
    backend = HFBackend(args.model, dtype=args.dtype, device=device, threads=args.threads, batch_size=max(SIZES))
    model, tokenizer = backend.model, backend.tokenizer
    states, infos, instructions = observations(max(SIZES) + args.naive_decisions * args.rounds)
    requests = [ScoreRequest(instructions, s, tuple(i["action_names"])) for s, i in zip(states, infos, strict=True)]
    builder, _ = backend.prompt_builder(instructions)
    backend.score(requests[:8])  # warm-up (oneDNN kernels, prefix cache)
    flops = {n: score_flops(backend, requests[:n]) for n in SIZES}
    engine = None
    if args.backend == "vllm":
        from lm_backend_axis import measure_round

        from llm_gym.lm.backends import make_backend

        # On a GPU the hf model already holds memory there: vLLM's default share (0.9) would not be free.
        share = 0.5 if device.startswith("cuda") else None
        engine = make_backend(
            "vllm", args.model, dtype=str(model.dtype).removeprefix("torch."), gpu_memory_utilization=share
        )
        engine.score(requests[:8])  # warm-up (the system prompt's blocks into the prefix cache)
        axis_rounds: list[dict] = []

    rounds: list[dict[str, float]] = []
    naive_parse_failures = 0
    for r in range(args.rounds):
        row: dict[str, float] = {}
        for n in SIZES:
            row[f"score_{n}_wall"], row[f"score_{n}_cpu"], _ = timed(lambda n=n: backend.score(requests[:n]))
        start = max(SIZES) + r * args.naive_decisions
        walls, cpus = [], []
        for state, info in zip(states[start : start + args.naive_decisions], infos[start:], strict=False):
            ids = torch.tensor([builder.encode([state])[0].ids], device=model.device)

            def naive(ids=ids) -> str:
                with torch.inference_mode():
                    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=True,
                                         pad_token_id=tokenizer.pad_token_id)  # fmt: skip
                return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)

            wall, cpu, text = timed(naive)
            walls.append(wall)
            cpus.append(cpu)
            naive_parse_failures += parse_action(text, info["action_names"], info["legal_actions"]).action is None
        row["naive_wall"], row["naive_cpu"] = sum(walls) / len(walls), sum(cpus) / len(cpus)
        row["matmul_wall"], row["matmul_cpu"] = matmul_probe(model.dtype, device)
        rounds.append(row)
        if engine is not None:
            axis_rounds.append(measure_round(backend, engine, requests[: max(SIZES)], SIZES, seed=r))

    def median(values: list[float]) -> float:
        return float(statistics.median(values))

    bound_flops = 2 * 2048**3 * 4
    report: dict[str, object] = {
        "model": args.model,
        "dtype": str(model.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "env": ENV,
        "prefix_tokens": len(builder.prefix_ids),
        "mean_prompt_tokens": float(np.mean([len(p.ids) for p in builder.encode(states[:32])])),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
        "load_average_1min": os.getloadavg()[0],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "naive_decisions_per_s": {
            "wall": median([1 / r["naive_wall"] for r in rounds]),
            "cpu": median([1 / r["naive_cpu"] for r in rounds]),
        },  # fmt: skip
        "naive_parse_failure_rate": naive_parse_failures / (args.rounds * args.naive_decisions),
        "matmul_bound_gflops": {
            "wall": median([bound_flops / r["matmul_wall"] / 1e9 for r in rounds]),
            "cpu": median([bound_flops / r["matmul_cpu"] / 1e9 for r in rounds]),
        },  # fmt: skip
        "score": {},
    }
    for n in SIZES:
        report["score"][f"N={n}"] = {
            "decisions_per_s": {
                "wall": median([n / r[f"score_{n}_wall"] for r in rounds]),
                "cpu": median([n / r[f"score_{n}_cpu"] for r in rounds]),
            },  # fmt: skip
            "ratio_to_naive": {
                "wall": median([r["naive_wall"] * n / r[f"score_{n}_wall"] for r in rounds]),
                "cpu": median([r["naive_cpu"] * n / r[f"score_{n}_cpu"] for r in rounds]),
            },  # fmt: skip
            "gflops": median([flops[n] / r[f"score_{n}_wall"] / 1e9 for r in rounds]),
            "fraction_of_matmul_bound": {
                "wall": median([flops[n] / r[f"score_{n}_wall"] / (bound_flops / r["matmul_wall"]) for r in rounds]),
                "cpu": median([flops[n] / r[f"score_{n}_cpu"] / (bound_flops / r["matmul_cpu"]) for r in rounds]),
            },
        }
    report["device"] = device
    if engine is not None:
        from lm_backend_axis import summarize

        report["backend_axis"] = {"reference": "hf backend, same requests, same rounds"}
        report["backend_axis"].update(summarize(axis_rounds, SIZES, median))
        engine.close()
    best = max(SIZES, key=lambda n: report["score"][f"N={n}"]["ratio_to_naive"]["cpu"])
    report["best"] = {"N": best, **report["score"][f"N={best}"], "goal_ratio": 10.0}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
