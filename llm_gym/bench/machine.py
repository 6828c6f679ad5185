"""Where a timing was taken: the CPU (:func:`llm_gym.lm.cpu.cpu_description`: its model name, the features that decide
whether the default model runs in bfloat16 or float32, the cores), torch's threads and the load. A timing without
them cannot be compared with another."""

from __future__ import annotations

import os
import sys
from typing import Any

from llm_gym.lm.cpu import cpu_description


def timing_machine(load_before: float) -> dict[str, Any]:
    """:func:`cpu_description` with torch's CPU threads (None where the timed work did not load torch) and the
    1-minute load average before the timed work and now (a busy machine's times are not an idle one's)."""
    torch = sys.modules.get("torch")  # read where the work loaded it; timing it is no reason to load it
    return cpu_description() | {
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "load_average_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
