"""The CPU this process runs on: its model name, the cores it may use and the instruction-set features that decide
how the default model runs. A CPU with AVX512-BF16 or AMX runs it in bfloat16 (``dtype=auto``), one with AVX2 alone
in float32, about 4 times slower for the same work on this project's 2-core machines
(docs/results/ppo_lora_throughput_*.json). Read from /proc/cpuinfo; elsewhere the name is the platform's and the
features are none.

No torch here: the model loader (:mod:`llm_gym.lm.models`), the thread settings (:mod:`llm_gym.lm.runtime`) and the
record beside a timing (:mod:`llm_gym.bench.machine`) all read the CPU through this one module."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")

ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
"""The CPU features recorded beside a timing, as /proc/cpuinfo names them."""

FAST_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""Either one gives torch a bfloat16 matmul faster than float32 on the CPU."""


def _first_processor(cpuinfo: Path) -> dict[str, str]:
    """The first processor's ``key: value`` lines (every core of a VM shows the same); empty where unreadable."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_name(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name; the platform's name where cpuinfo has none."""
    return _first_processor(cpuinfo).get("model name") or platform.processor() or platform.machine() or "unknown"


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str]:
    """The CPU's feature flags (empty where cpuinfo is unreadable)."""
    return set(_first_processor(cpuinfo).get("flags", "").split())


def has_fast_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU has a fast bfloat16 matmul (AVX512-BF16 or AMX), which ``dtype=auto`` uses."""
    return not cpu_flags(cpuinfo).isdisjoint(FAST_BF16_FLAGS)


def cpu_description(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """``{"cpu": model name, "isa": the ISA_FLAGS it has, "cores": the cores this process may use}``."""
    flags = cpu_flags(cpuinfo)
    return {"cpu": cpu_name(cpuinfo), "isa": [f for f in ISA_FLAGS if f in flags], "cores": available_cores()}
