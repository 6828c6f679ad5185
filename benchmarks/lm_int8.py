"""``quantize=int8`` against float32 on the ``hf`` backend, in one run: score-mode speed, the effect on the policy,
and memory.

Prints JSON. Both backends load the same model in the same process (float32, and int8 = the decoder's Linear layers
with int8 weights, :mod:`llm_gym.lm.quantize`).

* **speed**: score-mode decisions/s at N = 1, 8, 32 on the same real LLMBreakout-text-v0 states
  (:func:`lm_policy_throughput.observations`). Each round times float32 and int8 at every N, alternating which
  goes first, and every ratio (int8 / float32 decisions/s) is the median of per-round ratios, so load from other
  processes on a shared machine hits both alike. Rates per wall second and per CPU second of this process.
* **policy**: a fixed set of real decisions recorded from LLMBreakout-text-v0 (the scripted tracker with random
  moves mixed in), OpenSpiel tic_tac_toe and kuhn_poker (random legal moves): per env, the share of decisions where
  int8's most likely action is float32's (greedy agreement), the mean total-variation distance between the two
  action distributions (the score-mode policy: a softmax over the legal actions' log-likelihoods), the mean and
  max absolute difference of the action log-probs, and in generate mode the share of greedy answers (up to 8
  tokens) that are identical. The same score numbers, on the first ``--reference-decisions`` of each env, for a
  *weight-only* int8 reference (weights rounded to int8 per channel, activations left in float32; simulated in
  float32, no fast kernel) split the error between weights and activations.
* **memory**: each variant is loaded in a fresh subprocess that scores 8 prompts: the resident set growth over the
  bare imports, the peak, and the bytes the model's weights take.

    python benchmarks/lm_int8.py [--model smollm2-135m] [--rounds 3] [--decisions 80] [--reference-decisions 32]
        [--threads 0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from lm_args import lm_parser
from lm_policy_throughput import observations, timed

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import legal_choices, step_instructions
from llm_gym.lm.backends import GenerateRequest, ScoreRequest
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.cpu import cpu_name
from llm_gym.lm.quantize import is_quantized_linear, quantized_linear_count

SIZES = (1, 8, 32)
POLICY_ENVS = ("LLMBreakout-text-v0", "OpenSpiel-tic_tac_toe-v0", "OpenSpiel-kuhn_poker-v0")
GENERATE_PER_ENV = 8


def recorded_decisions(env_id: str, count: int, seed: int = 0) -> list[ScoreRequest]:
    """``count`` real decisions of ``env_id``: every Breakout state a few steps apart, every OpenSpiel decision."""
    env, rng = gym.make(env_id), np.random.default_rng(seed)
    traits = EnvTraits.of(env)
    scripted = ScriptedPolicy(EnvConfig(env_id)) if env_id.startswith("LLMBreakout") else None
    obs, info = env.reset(seed=seed)
    decisions: list[ScoreRequest] = []
    while len(decisions) < count:
        ids, names = legal_choices(info, env_id)
        if scripted is None or rng.random() < 0.25:  # Breakout: a state every ~4 steps, so states differ
            decisions.append(ScoreRequest(step_instructions(info, traits.instructions), obs, tuple(names)))
        use_script = scripted is not None and rng.random() < 0.7
        action = scripted.act([obs], [info])[0] if use_script else int(ids[int(rng.integers(len(ids)))])
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    return decisions


def action_logprobs(backend: HFBackend, requests: list[ScoreRequest]) -> list[np.ndarray]:
    """The score-mode policy's log-probs over each decision's legal actions."""
    return [row - np.logaddexp.reduce(row) for row in backend.score(requests)]


def compare(reference: list[np.ndarray], other: list[np.ndarray]) -> dict[str, float]:
    diff = np.concatenate([np.abs(a - b) for a, b in zip(reference, other, strict=True)])
    tv = [0.5 * float(np.abs(np.exp(a) - np.exp(b)).sum()) for a, b in zip(reference, other, strict=True)]
    agree = [int(np.argmax(a)) == int(np.argmax(b)) for a, b in zip(reference, other, strict=True)]
    return {
        "greedy_agreement": float(np.mean(agree)),
        "mean_total_variation": float(np.mean(tv)),
        "max_total_variation": float(np.max(tv)),
        "mean_abs_logprob_diff": float(diff.mean()),
        "max_abs_logprob_diff": float(diff.max()),
    }


def weight_only_int8(backend: HFBackend) -> HFBackend:
    """A float32 copy of ``backend``'s model whose decoder Linear weights are rounded to int8 per output channel (as
    ``quantize=int8`` stores them) and kept in float32: the weight rounding alone, without activation rounding."""
    import copy

    model = copy.deepcopy(backend.model)
    with torch.no_grad():
        for module in model.get_decoder().modules():
            if isinstance(module, torch.nn.Linear):
                scale = module.weight.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
                module.weight.copy_(torch.round(module.weight / scale).clamp(-128, 127) * scale)
    return HFBackend.from_model(model, backend.tokenizer, batch_size=backend.batch_size)


def weight_bytes(model: Any) -> int:
    """Bytes of the weights as held: float tensors, and int8 weights + per-channel scales of quantized Linears."""
    total = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    for module in model.modules():
        if is_quantized_linear(module):
            weight, bias = module.weight(), module.bias()
            total += weight.numel() * weight.element_size() + weight.shape[0] * 16  # scale + zero point per row
            total += 0 if bias is None else bias.numel() * bias.element_size()
    return total


def memory_probe(model: str, quantize: str, threads: int) -> dict[str, float]:
    """Run in a fresh process: load one variant, score 8 prompts, report resident memory."""

    def rss_mib() -> float:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    states, infos, instructions = observations(8)
    before = rss_mib()
    backend = HFBackend(model, dtype="float32", quantize=quantize, threads=threads)  # type: ignore[arg-type]
    backend.score([ScoreRequest(instructions, s, tuple(i["action_names"])) for s, i in zip(states, infos, strict=True)])
    return {
        "rss_growth_mib": rss_mib() - before,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "weight_mib": weight_bytes(backend.model) / 2**20,
    }


def probe_in_subprocess(model: str, quantize: str, threads: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--model", model, "--threads", str(threads), "--memory-probe", quantize]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--decisions", type=int, default=80, help="recorded decisions per env for the policy part")
    parser.add_argument("--reference-decisions", type=int, default=32, help="of them, scored by weight-only int8")
    parser.add_argument("--memory-probe", choices=["none", "int8"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        print(json.dumps(memory_probe(args.model, args.memory_probe, args.threads)))
        return
    started, load_before = time.perf_counter(), os.getloadavg()
    memory = {q: probe_in_subprocess(args.model, q, args.threads) for q in ("none", "int8")}
    stage("memory", started)
    backends = {
        "float32": HFBackend(args.model, dtype="float32", device="cpu", threads=args.threads, batch_size=max(SIZES)),
        "int8": HFBackend(args.model, quantize="int8", device="cpu", threads=args.threads, batch_size=max(SIZES)),
    }
    states, infos, instructions = observations(max(SIZES))
    requests = [ScoreRequest(instructions, s, tuple(i["action_names"])) for s, i in zip(states, infos, strict=True)]
    for backend in backends.values():
        backend.score(requests[:8])  # warm-up: kernels, the system prompt's KV cache

    rounds: list[dict[str, float]] = []
    for r in range(args.rounds):
        row: dict[str, float] = {}
        order = list(backends) if r % 2 == 0 else list(reversed(backends))
        for n in SIZES:
            for name in order:
                row[f"{name}_{n}_wall"], row[f"{name}_{n}_cpu"], _ = timed(
                    lambda n=n, b=backends[name]: b.score(requests[:n])
                )
        rounds.append(row)

    def median(values: list[float]) -> float:
        return float(statistics.median(values))

    speed: dict[str, Any] = {}
    for n in SIZES:
        rates = {
            name: {clock: median([n / r[f"{name}_{n}_{clock}"] for r in rounds]) for clock in ("wall", "cpu")}
            for name in backends
        }
        speed[f"N={n}"] = {
            "decisions_per_s": rates,
            "int8_over_float32": {
                clock: median([r[f"float32_{n}_{clock}"] / r[f"int8_{n}_{clock}"] for r in rounds])
                for clock in ("wall", "cpu")
            },
        }
    load_after_speed = os.getloadavg()
    stage("speed", started)

    weight_only = weight_only_int8(backends["float32"])
    policy: dict[str, Any] = {}
    for env_id in POLICY_ENVS:
        decisions = recorded_decisions(env_id, args.decisions)
        reference = action_logprobs(backends["float32"], decisions)
        prompts = [GenerateRequest(d.instructions, d.observation) for d in decisions[:GENERATE_PER_ENV]]
        answers = {
            name: [c.text for c in backend.generate(prompts, max_new_tokens=8, temperature=0.0)]
            for name, backend in backends.items()
        }
        same = [a == b for a, b in zip(answers["float32"], answers["int8"], strict=True)]
        stage(f"policy {env_id}", started)
        policy[env_id] = {
            "decisions": len(decisions),
            "legal_actions_mean": float(np.mean([len(d.choices) for d in decisions])),
            "int8": {
                **compare(reference, action_logprobs(backends["int8"], decisions)),
                "generate_identical_answers": float(np.mean(same)),
                "generate_prompts": len(prompts),
            },
            "weight_only_int8_reference": {
                "decisions": len(decisions[: args.reference_decisions]),
                **compare(
                    reference[: args.reference_decisions],
                    action_logprobs(weight_only, decisions[: args.reference_decisions]),
                ),
            },
        }
    load_after = os.getloadavg()

    report: dict[str, Any] = {
        "model": args.model,
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "quantized_linear_layers": quantized_linear_count(backends["int8"].model),
        "quantized_engine": torch.backends.quantized.engine,
        "cpu": cpu_name(),
        "cpu_flags": sorted(_int8_flags()),
        "load_average_1min": {"start": load_before[0], "after_speed": load_after_speed[0], "end": load_after[0]},
        "python": platform.python_version(),
        "torch": torch.__version__,
        "speed_env": "LLMBreakout-text-v0",
        "speed": speed,
        "policy": policy,
        "memory": memory,
        "memory_int8_over_float32": {
            key: memory["int8"][key] / memory["none"][key] for key in ("rss_growth_mib", "weight_mib")
        },
        "seconds": time.perf_counter() - started,
    }
    print(json.dumps(report, indent=2))


def stage(name: str, started: float) -> None:
    print(f"[{time.perf_counter() - started:7.1f} s] {name} done", file=sys.stderr, flush=True)


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
        return set(text.split("flags", 1)[1].split("\n", 1)[0].split())
    except (OSError, IndexError):
        return set()


def _int8_flags() -> set[str]:
    """The CPU features that decide int8 matmul speed (VNNI: one instruction per int8 dot product step)."""
    wanted = {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16", "avx512_bf16"}
    return _cpu_flags() & wanted


if __name__ == "__main__":
    main()
