"""The backend axis of ``lm_policy_throughput.py``: the same decisions through the ``vllm`` backend and through the
``hf`` backend in the same rounds, for score mode and for generate mode (10 sampled tokens per decision, all envs
of a batch at once), at each N. Imported by that benchmark (``--backend vllm``); not run on its own.

vLLM computes in worker processes, so CPU time is this process's plus its children's (psutil).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from llm_gym.lm.backends import GenerateRequest, ScoreRequest

GENERATE_TOKENS = 10


def cpu_seconds() -> float:
    """CPU time of this process and every process it started (vLLM's engine and worker)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total


def timed_all(function: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = function()
    return time.perf_counter() - wall, cpu_seconds() - cpu, result


def measure_round(hf: Any, engine: Any, requests: list[ScoreRequest], sizes: tuple[int, ...], seed: int) -> dict:
    """One round: score and generate of the first n requests through each backend, for every n."""
    row: dict[str, float] = {}
    for n in sizes:
        asks = [GenerateRequest(r.instructions, r.observation) for r in requests[:n]]
        for name, backend in (("hf", hf), ("vllm", engine)):
            wall, cpu, _ = timed_all(lambda b=backend, n=n: b.score(requests[:n]))
            row[f"{name}_score_{n}_wall"], row[f"{name}_score_{n}_cpu"] = wall, cpu

            def sample(b=backend, asks=asks) -> list:
                return b.generate(asks, max_new_tokens=GENERATE_TOKENS, temperature=1.0, seed=seed)

            wall, cpu, answers = timed_all(sample)
            row[f"{name}_generate_{n}_wall"], row[f"{name}_generate_{n}_cpu"] = wall, cpu
            row[f"{name}_generate_{n}_tokens"] = sum(c.num_tokens for c in answers)
    return row


def summarize(rounds: list[dict], sizes: tuple[int, ...], median: Callable[[list[float]], float]) -> dict:
    """Per N: decisions/s of each backend and mode, and vllm / hf ratios (medians of per-round ratios)."""
    out: dict[str, Any] = {}
    for n in sizes:
        entry: dict[str, Any] = {}
        for mode in ("score", "generate"):
            for clock in ("wall", "cpu"):
                for name in ("hf", "vllm"):
                    key = f"{name}_{mode}_{n}_{clock}"
                    entry.setdefault(f"{name}_{mode}_decisions_per_s", {})[clock] = median([n / r[key] for r in rounds])
                entry.setdefault(f"{mode}_ratio_vllm_to_hf", {})[clock] = median(
                    [r[f"hf_{mode}_{n}_{clock}"] / r[f"vllm_{mode}_{n}_{clock}"] for r in rounds]
                )
            if mode == "generate":
                for name in ("hf", "vllm"):
                    entry[f"{name}_generate_tokens_per_s"] = median(
                        [r[f"{name}_generate_{n}_tokens"] / r[f"{name}_generate_{n}_wall"] for r in rounds]
                    )
        out[f"N={n}"] = entry
    return out
