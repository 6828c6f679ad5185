"""Where a timing was taken: the CPU's name and features, read from a cpuinfo file."""

from __future__ import annotations

from pathlib import Path

from llm_gym.bench.machine import cpu_description, timing_machine

AVX2_ONLY = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx fma avx2 bmi2
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx fma avx2 bmi2
"""


def test_names_the_cpu_and_only_the_features_that_decide_the_dtype(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AVX2_ONLY)
    described = cpu_description(cpuinfo)
    assert described["cpu"] == "AMD EPYC 7B13" and described["isa"] == ["avx2"] and described["cores"] >= 1
    cpuinfo.write_text(AVX2_ONLY.replace("avx2 bmi2", "avx2 avx512f avx512_bf16 bmi2"))
    assert cpu_description(cpuinfo)["isa"] == ["avx2", "avx512f", "avx512_bf16"]


def test_an_unreadable_cpuinfo_is_unknown_not_an_error(tmp_path: Path) -> None:
    assert cpu_description(tmp_path / "missing") | {"cores": 0} == {"cpu": "unknown", "isa": [], "cores": 0}


def test_a_timing_records_the_load_and_the_threads() -> None:
    machine = timing_machine(0.25)
    assert machine["load_average_1m_before_after"][0] == 0.25 and len(machine["load_average_1m_before_after"]) == 2
    assert "torch_threads" in machine
