"""``llm-gym play --exact``: the exact evaluation of a policy on a small OpenSpiel game, as a table and as JSON, and
its refusals (one line, before any model loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.cli import build_app


def _play(*args: str):
    return CliRunner().invoke(build_app(), ["play", *args])


def test_exact_play_reports_the_solvers_tic_tac_toe_values() -> None:
    result = _play("--agent", "solver", "--env", "OpenSpiel-tic_tac_toe-v0", "--exact", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["agent"] == "solver" and report["greedy"] is True
    assert report["loss"] == 0.0 and report["worst_return"] == 0.0
    assert report["win"] == pytest.approx(0.9556, abs=1e-4)  # 0.9948 as x, 0.9164 as o, each seat half the time
    assert [s["seat"] for s in report["seats"]] == [0, 1]


def test_exact_play_prints_the_best_response_ratio_and_exploitability_for_poker() -> None:
    result = _play("--agent", "best_response", "--env", "OpenSpiel-kuhn_poker-v0", "--exact")
    assert result.exit_code == 0, result.output
    assert "best response to random: 0.4583 (this policy: 1.00x); exploitability 0.4167" in result.output


def test_exact_play_refuses_what_it_cannot_walk_before_loading_a_model(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-model-here")  # loading it would fail with another message
    cases = [
        (["--env", "LLMPong-v0"], "OpenSpiel game trees"),
        (["--env", "OpenSpiel-tic_tac_toe-v0", "--opponent", "mcts"], "--opponent random"),
        (["--env", "OpenSpiel-goofspiel-v0"], "simultaneous"),
        (["--env", "OpenSpiel-kuhn_poker-v0", "--episodes", "3", "--task-ids", "0-1"], "drop --task-ids"),
    ]
    for args, message in cases:
        result = _play("--agent", "lm", "--model", missing, *args, "--exact")
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
