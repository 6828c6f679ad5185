"""Episodes per second of one bench suite: plain local run vs Ray with 1 and with 2 workers, as ratios.

    python benchmarks/bench_scaling.py                  # the built-in CPU-bound suite below
    python benchmarks/bench_scaling.py --suite smoke    # any suite (LM entries load the model once per worker)

Each run plays the whole suite into a fresh SQLite store. Ray runs share one local Ray instance started with as many
CPUs as the largest worker count. Ratios come twice: on the whole wall time (what a user waits for, including
starting Ray and its actors, each a process that imports llm-gym) and on the playing time alone (``_playing``: the
steady state a long suite sees). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite

# CPU-bound and policy-light: OpenSpiel's MCTS (100 simulations a move) against a random opponent, and the ALE
# emulator under a random policy. No LM, so the workers' start-up is small against the work.
CPU_BOUND_SUITE = """
description = "bench_scaling: CPU-bound entries (MCTS search, ALE emulation)"
episodes = 32
max_steps = 400
num_envs = 4

[splits.heldout]
seed = 100_000_000

[[envs]]
label = "connect_four"
id = "OpenSpiel-connect_four-v0"

[[envs]]
label = "breakout"
id = "LLMBreakout-text-v0"

[[entries]]
name = "mcts-100"
agent = "mcts"
set = { simulations = 100 }
envs = ["connect_four"]

[[entries]]
name = "random"
agent = "random"
envs = ["breakout"]
"""


def timed_run(suite_path: Path, directory: Path, name: str, **ray_options: object) -> dict[str, float]:
    suite = load_suite(suite_path)
    with EpisodeStore(directory / f"{name}.sqlite") as store:
        start = time.perf_counter()
        report = run_suite(suite, store, progress=False, **ray_options)
        seconds = time.perf_counter() - start
    playing = seconds - report.startup_seconds
    return {
        "episodes": report.played,
        "seconds": round(seconds, 2),
        "startup_seconds": round(report.startup_seconds, 2),
        "episodes_per_second": report.played / seconds,
        "episodes_per_second_playing": report.played / playing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="suite name or path (default: the CPU-bound suite in this file)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray worker counts to measure")
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        suite_path = Path(args.suite) if args.suite and args.suite.endswith(".toml") else None
        if args.suite and suite_path is None:
            suite_path = load_suite(args.suite).path
        if suite_path is None:
            suite_path = directory / "cpu_bound.toml"
            suite_path.write_text(CPU_BOUND_SUITE)
        results = {"local": timed_run(suite_path, directory, "local")}
        ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
        try:
            for workers in args.workers:
                results[f"ray_{workers}"] = timed_run(suite_path, directory, f"ray{workers}", ray=True, workers=workers)
        finally:
            ray.shutdown()
    ratios = {}
    for rate in ("episodes_per_second", "episodes_per_second_playing"):
        suffix = "" if rate == "episodes_per_second" else "_playing"
        local = results["local"][rate]
        ratios |= {f"{k}_vs_local{suffix}": v[rate] / local for k, v in results.items() if k != "local"}
        if "ray_1" in results and "ray_2" in results:
            ratios[f"ray_2_vs_ray_1{suffix}"] = results["ray_2"][rate] / results["ray_1"][rate]
    print(
        json.dumps(
            {
                "benchmark": "bench_scaling",
                "suite": str(args.suite or "built-in CPU-bound suite"),
                "machine": {
                    "processor": platform.processor() or platform.machine(),
                    "cpus": len(os.sched_getaffinity(0)),
                    "load_average_1min": os.getloadavg()[0],
                },
                "runs": {k: {n: round(x, 3) for n, x in v.items()} for k, v in results.items()},
                "ratios": {k: round(v, 3) for k, v in ratios.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
