"""Training throughput of nanogpt_ppo's presets, in env steps/s, against the machine's own matmul FLOP/s.

For each preset this times, with the preset's real env, network and batch sizes:
  * collection: vector-env steps with one batched forward pass per step (as the training loop does),
  * update: minibatch gradient steps (forward + backward + Adam),
and combines them into env steps/s of training: 1 / (collect seconds per step + epochs * update seconds per sample),
both per wall second and per CPU second of this process (on a shared machine the CPU figure is the stable one).
Alongside: raw env steps/s of the same stepper (llm_gym.stepping) with random legal actions (the ceiling collection
can reach) and of plain ``gym.make`` envs stepped in a loop (``stepper_over_plain_envs``: what the shared stepping
path costs), the FLOP estimate per sample (forward, and forward + backward = 3x forward), the FLOP/s the update achieves, and a
matmul's FLOP/s measured in the same run on the same threads, so a preset can be read as a fraction of the bound.
The reference preset runs for hours per update on a CPU, so each part is timed on a few batches, not a whole update.

    python benchmarks/nanogpt_throughput.py [--threads 1] [--presets cpu,reference] [--env LLMBreakout-ascii-v0]
        [--set KEY=VALUE ...] [--variant KEY=VALUE ... [--rounds 3]]

``--set`` changes the config of every preset timed, as ``llm-gym train --set`` does. ``--variant`` prices an option:
each preset is timed plain and with the variant's settings on top, alternating for ``--rounds`` rounds so load from
other processes falls on both alike, and ``variant_over_plain`` gives the median per-round ratio of the CPU-second
figures (above 1: the variant is faster).

The reference preset takes about 0.5 s per forward pass on one core, so it is timed on fewer samples.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo.buffer import RolloutBuffer
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import action_masks
from llm_gym.agents.nanogpt_ppo.model import NanoGPTActorCritic, distribution_terms, forward_flops
from llm_gym.agents.nanogpt_ppo.policy import env_for, network_shape
from llm_gym.agents.nanogpt_ppo.tokenizer import CharTokenizer
from llm_gym.config import apply_overrides, parse_assignments
from llm_gym.rl import ppo_losses
from llm_gym.stepping import EnvStepper, make_vector_env


def matmul_flops_per_cpu_second(size: int = 1024, seconds: float = 2.0) -> float:
    """FLOP per CPU second of a square fp32 matmul on the current threads (the bound a dense model could approach;
    per CPU second, like the update figures it is compared with, so a busy machine does not move the ratio)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    count, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        torch.mm(a, b)
        count += 1
    return 2 * size**3 * count / (time.process_time() - start)


def random_legal(infos: list[dict], rng: np.random.Generator) -> list[int]:
    return [int(rng.choice(info["legal_actions"])) for info in infos]


def raw_env_steps_per_second(env: EnvConfig, n: int, steps: int) -> tuple[float, float]:
    """Env steps/s with random legal actions: (plain envs from gym.make in a loop, the stepper over a vector env),
    interleaved in rounds so load from other processes hits both alike."""
    plain = [env.make() for _ in range(n)]
    infos = [e.reset(seed=i)[1] for i, e in enumerate(plain)]
    stepper = EnvStepper(make_vector_env(env, n), seed=0)
    stepper.reset()
    rng = np.random.default_rng(0)
    plain_seconds = stepper_seconds = 0.0
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(steps // 5):
            for i, (e, action) in enumerate(zip(plain, random_legal(infos, rng), strict=True)):
                _, _, terminated, truncated, infos[i] = e.step(action)
                if terminated or truncated:
                    infos[i] = e.reset()[1]
        plain_seconds += time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(steps // 5):
            stepper.step(random_legal(stepper.infos, rng))
        stepper_seconds += time.perf_counter() - start
    stepper.close()
    for e in plain:
        e.close()
    done = (steps // 5) * 5 * n
    return done / plain_seconds, done / stepper_seconds


SAMPLES = {"cpu": 512, "reference": 64}
"""Collection samples timed per preset (the reference preset costs ~3,000x more per sample)."""
MINIBATCHES = {"cpu": 6, "reference": 1}
"""Gradient steps timed per preset, after one untimed warm-up step."""


class Clock:
    """Wall and CPU seconds (this process, all threads) of the timed sections."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.process_time() - self._cpu


def preset_config(preset: str, overrides: dict[str, str], variant: dict[str, str] | None = None) -> NanoGPTPPOConfig:
    """The preset with ``--set`` overrides, then ``--variant`` ones, applied before it fills its remaining fields."""
    cfg = apply_overrides(NanoGPTPPOConfig(preset=preset), overrides)  # type: ignore[arg-type]  (a CLI string)
    return apply_overrides(cfg, variant or {}, source="--variant").resolved()


def bench_preset(
    cfg: NanoGPTPPOConfig, env_id: str, collect_samples: int, minibatches: int, measure_env: bool = True
) -> dict[str, object]:
    """Times one resolved config. ``measure_env=False`` skips the env-only figures (the same for every variant of a
    preset's network)."""
    env = env_for(cfg, EnvConfig(env_id))
    shape = network_shape(cfg, env)
    torch.manual_seed(0)
    model = NanoGPTActorCritic(shape)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2))
    tokenizer, generator = CharTokenizer(), torch.Generator().manual_seed(0)
    n = cfg.num_envs
    plain_sps, raw_sps = raw_env_steps_per_second(env, n, max(5, 400 // n)) if measure_env else (0.0, 0.0)
    stepper = EnvStepper(make_vector_env(env, n), seed=0)
    stepper.reset()
    collect_steps = max(1, collect_samples // n)

    # -- collection, as the training loop does it --------------------------------------------------------------
    buffer = RolloutBuffer(collect_steps, n, shape.context, shape.n_actions)
    model.eval()
    collect = Clock()
    for t in range(collect_steps):
        with collect:
            masks = action_masks(stepper.infos, shape.n_actions)
            tokens, query = tokenizer.encode_batch([str(o) for o in stepper.observations], shape.context)
            with torch.inference_mode():
                logits, value = model(torch.from_numpy(tokens), torch.from_numpy(query), torch.from_numpy(masks))
                action = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(1)
                logprob, _ = distribution_terms(logits, action)
            buffer.add(t, tokens, query, masks, torch.zeros(n), action, logprob, value)
            result = stepper.step(action.tolist())
            buffer.add_reward(t, torch.as_tensor(result.rewards, dtype=torch.float32))
    stepper.close()
    buffer.compute_returns(torch.zeros(n), torch.zeros(n), cfg.gamma, cfg.gae_lambda)

    # -- update: minibatch gradient steps on the collected samples ---------------------------------------------
    model.train()
    size = min(cfg.minibatch_size, collect_steps * n)
    batches = [b for _ in range(minibatches + 1) for b in buffer.minibatches(size, generator)][: minibatches + 1]
    update = Clock()
    for i, mb in enumerate(batches):
        with update if i > 0 else Clock():  # the first step pays for allocator warm-up
            logits, new_value = model(mb.tokens, mb.query_index, mb.action_mask)
            new_logprob, entropy = distribution_terms(logits, mb.actions)
            losses = ppo_losses(new_logprob, mb.logprobs, mb.advantages, new_value, mb.values, mb.returns, entropy)
            optimizer.zero_grad(set_to_none=True)
            losses.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
    samples = sum(len(b) for b in batches[1:])
    collected = collect_steps * n
    epochs = cfg.update_epochs
    forward = forward_flops(shape, shape.context)
    collect_seconds_per_step = collect.wall / collected
    update_seconds_per_sample = update.wall / samples
    seconds_per_env_step = collect_seconds_per_step + epochs * update_seconds_per_sample
    cpu_seconds_per_env_step = collect.cpu / collected + epochs * update.cpu / samples
    env_figures = (
        {
            "plain_env_steps_per_second": round(plain_sps, 1),
            "raw_env_steps_per_second": round(raw_sps, 1),
            "stepper_over_plain_envs": round(raw_sps / plain_sps, 3),
            "collect_over_raw": round(1 / collect_seconds_per_step / raw_sps, 3),
        }
        if measure_env
        else {}
    )
    return {
        "env_kwargs": dict(env.kwargs),
        "context_tokens": shape.context,
        "parameters": sum(p.numel() for p in model.parameters()),
        "layers_heads_width_mlp": [shape.n_layer, shape.n_head, shape.n_embd, shape.mlp_ratio],
        "num_envs": n,
        "epochs": epochs,
        "minibatch_size": size,
        **env_figures,
        "collect_env_steps_per_second": round(1 / collect_seconds_per_step, 1),
        "collect_env_steps_per_cpu_second": round(collected / collect.cpu, 1),
        "update_samples_per_second": round(1 / update_seconds_per_sample, 1),
        "update_samples_per_cpu_second": round(samples / update.cpu, 1),
        "train_env_steps_per_second": round(1 / seconds_per_env_step, 2),
        "train_env_steps_per_cpu_second": round(1 / cpu_seconds_per_env_step, 2),
        "collect_share_of_time": round(collect_seconds_per_step / seconds_per_env_step, 3),
        "flops_forward_per_sample": forward,
        "flops_train_per_sample": 3 * forward,
        "flops_per_env_step": forward + epochs * 3 * forward,
        "update_flops_per_second": round(3 * forward / update_seconds_per_sample),
        "update_flops_per_cpu_second": round(3 * forward * samples / update.cpu),
        "timed": {"collect_samples": collected, "update_samples": samples},
    }


RATIO_FIGURES = ("train_env_steps_per_cpu_second", "collect_env_steps_per_cpu_second", "update_samples_per_cpu_second")
"""The CPU-second figures a variant is compared on (per CPU second: other processes on the machine cancel out)."""


def compare_variant(
    plain_cfg: NanoGPTPPOConfig, variant_cfg: NanoGPTPPOConfig, env_id: str, samples: int, minibatches: int, rounds: int
) -> dict[str, object]:
    """Both configs timed alternately for ``rounds`` rounds (at least 1); median per-round ratios."""
    ratios = []
    for _ in range(rounds):
        plain = bench_preset(plain_cfg, env_id, samples, minibatches, measure_env=False)
        with_variant = bench_preset(variant_cfg, env_id, samples, minibatches, measure_env=False)
        ratios.append({key: with_variant[key] / plain[key] for key in RATIO_FIGURES})  # type: ignore[operator]
    return {
        "parameters": [plain["parameters"], with_variant["parameters"]],
        "variant_over_plain": {key: round(float(np.median([r[key] for r in ratios])), 3) for key in RATIO_FIGURES},
        "per_round": [{key: round(r[key], 3) for key in RATIO_FIGURES} for r in ratios],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: what a run on a shared 2-core box uses)"
    )
    parser.add_argument("--presets", default="cpu,reference")
    parser.add_argument("--env", default="LLMBreakout-ascii-v0")
    parser.add_argument("--collect-samples", type=int, default=0, help="env steps timed per preset (0: SAMPLES)")
    parser.add_argument("--minibatches", type=int, default=0, help="gradient steps timed per preset (0: MINIBATCHES)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="a config field for every preset timed, as llm-gym train --set (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--variant", action="append", default=[], metavar="KEY=VALUE",
        help="also time each preset with these fields on top and print variant/plain ratios (repeatable)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="alternating plain/variant rounds (with --variant)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    try:
        overrides = parse_assignments(args.overrides)
        variant = parse_assignments(args.variant, "--variant")
        for preset in args.presets.split(","):  # every setting checked before anything is timed
            preset_config(preset, overrides, variant)
    except ValueError as exc:  # ConfigError or an unknown preset: one line that says what to change
        parser.error(str(exc))
    torch.set_num_threads(args.threads)
    bound = matmul_flops_per_cpu_second()
    report: dict[str, object] = {
        "env": args.env,
        "threads": args.threads,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "matmul_flops_per_cpu_second": round(bound),
        "overrides": overrides,
        "presets": {},
    }
    for preset in args.presets.split(","):
        plain_cfg = preset_config(preset, overrides)
        samples, minibatches = args.collect_samples or SAMPLES[preset], args.minibatches or MINIBATCHES[preset]
        result = bench_preset(plain_cfg, args.env, samples, minibatches)
        result["update_fraction_of_matmul_bound"] = round(result["update_flops_per_cpu_second"] / bound, 3)  # type: ignore[operator]
        if variant:
            variant_cfg = preset_config(preset, overrides, variant)
            compared = compare_variant(plain_cfg, variant_cfg, args.env, samples, minibatches, args.rounds)
            result["compared"] = {"variant": variant, **compared}
        report["presets"][preset] = result  # type: ignore[index]
    presets = report["presets"]
    if "cpu" in presets and "reference" in presets:  # type: ignore[operator]
        report["cpu_over_reference"] = {
            "train_env_steps_per_cpu_second": round(
                presets["cpu"]["train_env_steps_per_cpu_second"]
                / presets["reference"]["train_env_steps_per_cpu_second"],
                1,
            ),  # type: ignore[index]
            "flops_per_env_step": round(
                presets["reference"]["flops_per_env_step"] / presets["cpu"]["flops_per_env_step"], 1
            ),  # type: ignore[index]
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
