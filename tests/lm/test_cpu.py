"""The CPU read from a cpuinfo file: its name, the features that decide the dtype, and an unreadable file."""

from __future__ import annotations

from pathlib import Path

from llm_gym.lm.cpu import cpu_description, cpu_name, has_fast_bf16

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
    assert not has_fast_bf16(cpuinfo)
    cpuinfo.write_text(AVX2_ONLY.replace("avx2 bmi2", "avx2 avx512f avx512_bf16 bmi2"))
    assert cpu_description(cpuinfo)["isa"] == ["avx2", "avx512f", "avx512_bf16"] and has_fast_bf16(cpuinfo)
    cpuinfo.write_text(AVX2_ONLY.replace("avx2 bmi2", "avx2 amx_tile amx_bf16"))
    assert cpu_description(cpuinfo)["isa"] == ["avx2", "amx_bf16"] and has_fast_bf16(cpuinfo)


def test_an_unreadable_cpuinfo_names_the_platform_and_no_features(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    described = cpu_description(missing)
    assert described["isa"] == [] and described["cpu"] == cpu_name(missing) and described["cpu"]
    assert not has_fast_bf16(missing)
