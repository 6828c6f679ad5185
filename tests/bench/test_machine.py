"""Where a timing was taken: the CPU (tests/lm/test_cpu.py), torch's threads and the load before and after."""

from __future__ import annotations

from llm_gym.bench.machine import timing_machine
from llm_gym.lm.cpu import cpu_description


def test_a_timing_records_the_cpu_the_load_and_the_threads() -> None:
    machine = timing_machine(0.25)
    assert machine["load_average_1m_before_after"][0] == 0.25 and len(machine["load_average_1m_before_after"]) == 2
    assert "torch_threads" in machine
    assert {key: machine[key] for key in ("cpu", "isa", "cores")} == cpu_description()
