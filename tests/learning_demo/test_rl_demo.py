"""The RL demo (``make demo``) end to end on a tiny random model: ppo_lora from its preset, the untrained and the
trained model on the same held-out games and evaluated exactly, the reference rows, the table, the plot and the JSON
result; the command line and its one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from llm_gym.learning_demo.__main__ import main
from llm_gym.learning_demo.rl import RLDemoConfig, ppo_settings, run_rl_demo, save_rl_result
from llm_gym.learning_demo.rl_report import rl_summary_text, write_rl_plot
from llm_gym.lm.cpu import ISA_FLAGS
from llm_gym.training.evaluation import HELDOUT_SEED


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def _config(model: Path, **overrides) -> RLDemoConfig:
    base = dict(model=str(model), dtype="float32", threads=1, total_steps=300, eval_episodes=6)
    return RLDemoConfig(**{**base, **overrides})


def test_the_preset_trains_by_groups_and_is_evaluated_exactly(tiny_model_dir: Path) -> None:
    settings = ppo_settings(_config(tiny_model_dir))
    assert settings["advantage"] == "group" and settings["policy_loss"] == "target"
    assert settings["lr_schedule"] == "constant"  # the kuhn-poker-demo preset: half the steps, no annealing
    assert settings["total_steps"] == 300 and settings["eval_exact"] and settings["eval_episodes"] == 0
    assert ppo_settings(_config(tiny_model_dir, total_steps=0))["total_steps"] == 6144  # the preset's own


def test_trains_evaluates_on_held_out_seeds_and_exactly_and_reports(tiny_model_dir: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    result = run_rl_demo(_config(tiny_model_dir), tmp_path, log=lines.append)
    result.plot = write_rl_plot(result)
    saved = json.loads(save_rl_result(result).read_text())
    assert saved["eval_seeds"] == [HELDOUT_SEED, HELDOUT_SEED + 5] and result.env_steps >= 300
    machine = saved["machine"]  # where the timings were taken: the CPU, its bf16/AVX features, cores, load
    assert machine["cpu"] and machine["cores"] >= 1 and machine["torch_threads"] == 1
    assert set(machine["isa"]) <= set(ISA_FLAGS) and len(machine["load_average_1m_before_after"]) == 2
    for arm in (result.before, result.after, *result.references):
        assert arm.n == 6 and arm.exact is not None and arm.exact.exploitability is not None
    random, best = result.references[0].exact, result.references[1].exact
    assert best.expected_return == pytest.approx(11 / 24)  # the exact best response to random
    assert random.expected_return == pytest.approx(0.0) and not random.greedy  # its probabilities, not one draw
    assert result.curve[0][0] == 0 and result.curve[-1][0] == result.env_steps  # exact at the start and the end
    assert result.after.exact.expected_return == pytest.approx(result.curve[-1][1])  # the checkpoint is the end
    assert list(result.phases) == ["evaluate before", "train", "evaluate after", "reference rows"]
    assert Path(result.checkpoint, "adapter").is_dir() and result.plot.stat().st_size > 1000
    text = rl_summary_text(result)
    for expected in ("untrained model", "trained, ", "best response (reference)", "exact return",
                     "no demonstrations", "wall time", "machine: ", f"plot: {result.plot}", "x the best response's"):  # fmt: skip
        assert expected in text
    assert any(line.startswith("training ppo_lora (preset kuhn-poker") for line in lines)


def test_command_line_runs_the_rl_demo_and_refuses_bad_settings(tiny_model_dir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(main)
    runner = CliRunner()
    sets = [f"model={tiny_model_dir}", "dtype=float32", "threads=1", "total_steps=100", "eval_episodes=3"]
    result = runner.invoke(app, ["--runs-root", str(tmp_path), *[a for s in sets for a in ("--set", s)], "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.splitlines()[-1])["ppo_lora"]["advantage"] == "group"
    refused = runner.invoke(app, ["--set", "total_step=3"])
    assert refused.exit_code == 2 and "did you mean total_steps" in refused.output
    method = runner.invoke(app, ["--method", "grpo"])
    assert method.exit_code == 2 and "--method is rl or sft" in method.output
