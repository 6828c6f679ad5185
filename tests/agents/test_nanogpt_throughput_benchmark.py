"""benchmarks/nanogpt_throughput.py with config overrides: ``--set`` reaches the network that is timed, ``--variant``
times the preset plain and with the variant and reports ratios, and a bad key or preset is one argparse error line.
Real env and network, timed on a handful of samples (the figures themselves are not checked: the benchmark's job)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "nanogpt_throughput.py"
spec = importlib.util.spec_from_file_location("nanogpt_throughput", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)  # type: ignore[union-attr]

TINY = ["--presets", "cpu", "--collect-samples", "16", "--minibatches", "1"]


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    monkeypatch.setattr("sys.argv", ["nanogpt_throughput.py", *TINY, *args])
    monkeypatch.setattr(bench, "matmul_flops_per_cpu_second", lambda: 1e9)  # the bound is not what is tested
    bench.main()
    return json.loads(capsys.readouterr().out)


def test_set_changes_the_network_that_is_timed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    report = run(monkeypatch, capsys, "--set", "n_embd=32", "--set", "num_envs=2")
    cpu = report["presets"]["cpu"]
    assert report["overrides"] == {"n_embd": "32", "num_envs": "2"}
    assert cpu["layers_heads_width_mlp"][2] == 32 and cpu["num_envs"] == 2
    assert cpu["parameters"] < 89_000  # the cpu preset's network is 89k at width 64
    assert "compared" not in cpu


def test_variant_is_timed_beside_the_plain_preset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    report = run(monkeypatch, capsys, "--variant", "key_frequency_bias=true", "--rounds", "2")
    compared = report["presets"]["cpu"]["compared"]
    plain, with_variant = compared["parameters"]
    assert with_variant - plain == 4  # one learned scale per head of the cpu preset's 4
    assert len(compared["per_round"]) == 2
    ratios = compared["variant_over_plain"]
    assert set(ratios) == set(bench.RATIO_FIGURES)
    assert all(0 < ratio < 10 for ratio in ratios.values())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "key_frequncy_bias=true"], "--variant: unknown key 'key_frequncy_bias'"),
        (["--set", "num_envs=many"], "--set: num_envs='many' is not a valid int"),
        (["--variant", "key_frequency_bias"], "--variant expects key=value"),
        (["--presets", "cpux"], "unknown preset 'cpux'"),
        (["--variant", "key_frequency_bias=true", "--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_bad_settings_stop_before_anything_is_timed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    monkeypatch.setattr(bench, "bench_preset", lambda *a, **k: pytest.fail("timed despite a bad setting"))
    with pytest.raises(SystemExit):
        run(monkeypatch, capsys, *args)
    assert message in capsys.readouterr().err
