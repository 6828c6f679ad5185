"""Where a timing was taken: the CPU's model name and the instruction-set features that decide how fast the default
model runs on it. A CPU with AVX512-BF16 or AMX runs the model in bfloat16 (``dtype=auto``), one with AVX2 alone in
float32, about 4 times slower for the same work on this project's 2-core machines (docs/results/ppo_lora_throughput_*
.json): a timing without them cannot be compared with another. Read from /proc/cpuinfo (elsewhere: unknown)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
"""The CPU features recorded beside a timing, as /proc/cpuinfo names them."""


def cpu_description(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """``{"cpu": model name, "isa": the ISA_FLAGS it has, "cores": the cores this process may use}``."""
    text = cpuinfo.read_text(errors="replace") if cpuinfo.is_file() else ""
    fields: dict[str, str] = {}
    for line in text.splitlines():  # the first processor's lines: every core of a VM shows the same
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = fields.get("flags", "").split()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": fields.get("model name", "unknown"), "isa": [f for f in ISA_FLAGS if f in flags], "cores": cores}


def timing_machine(load_before: float) -> dict[str, Any]:
    """:func:`cpu_description` with torch's CPU threads (None where the timed work did not load torch) and the
    1-minute load average before the timed work and now (a busy machine's times are not an idle one's)."""
    torch = sys.modules.get("torch")  # read where the work loaded it; timing it is no reason to load it
    return cpu_description() | {
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "load_average_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
