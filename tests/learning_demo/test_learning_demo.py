"""The sft learning demo (``make demo-sft``) end to end on a tiny random model: demonstrations from the best response on
training seeds, sft with greedy evaluations before and after on held-out seeds, the reference rows on the same
seeds, the table, the plot and the JSON result; the command line, and its one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.demos.format import read_demos
from llm_gym.learning_demo import LearningDemoConfig, run_learning_demo, save_result, summary_text, write_plot
from llm_gym.learning_demo.__main__ import main
from llm_gym.learning_demo.config import SFT_EVAL_SEED_OFFSET

POSITIONS_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "learning_demo_positions.py"


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=64, init_std=0.1)


def _config(model: Path, **overrides) -> LearningDemoConfig:
    base = dict(model=str(model), dtype="float32", threads=1, trainable_layers=1, demo_episodes=6, eval_episodes=5)
    base |= dict(epochs=1, batch_size=4)
    return LearningDemoConfig(**{**base, **overrides})


def test_records_trains_evaluates_on_held_out_seeds_and_reports(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = _config(tiny_model_dir)
    lines: list[str] = []
    result = run_learning_demo(config, tmp_path, log=lines.append)
    result.plot = write_plot(result)
    saved = json.loads(save_result(result).read_text())

    records = read_demos(result.demos_path)
    assert len(records) == result.demo_decisions > 0
    assert {r.seed for r in records} <= set(range(0, 6))  # demonstrations on the training seeds only
    assert all(r.source["agent"] == "best_response" for r in records)
    assert saved["eval_seeds"] == [10_000, 10_004] and saved["demo_seeds"] == [0, 5]
    for arm in (result.before, result.after, *result.references):
        assert arm.n == 5 and len(arm.returns) == 5
    # The reference rows play the same held-out games as the model: the demonstrator's returns are its own.
    demonstrator = result.references[1]
    assert demonstrator.label.startswith("best_response") and saved["references"][1]["returns"] == demonstrator.returns
    assert list(result.phases)[:2] == ["record demonstrations", "load model, encode demos"]
    assert result.wall_seconds > 0 and Path(result.checkpoint, "adapter").is_dir()
    assert result.plot.stat().st_size > 1000 and result.plot.suffix == ".png"
    assert saved["learning_shown"] == result.learning_shown()
    # Agreement per position: the demonstrator's positions in the same 5 held-out games, each model's answer there.
    assert [a["label"] for a in saved["agreement"]] == [result.before.label, result.after.label]
    assert len(saved["positions"]) == len(result.positions) >= 1
    assert sum(p["visits"] for p in saved["positions"]) == saved["agreement"][0]["decisions"] >= 5
    for entry in saved["agreement"]:
        assert len(entry["answers"]) == len(result.positions)
        assert entry["agreed_decisions"] <= entry["best_decisions"] <= entry["decisions"]
    assert "agreement per position" in result.phases
    # Positions only random play reaches in those games' seeds: none is the demonstrator's, each model is asked there.
    unreached = saved["unreached_positions"]
    assert unreached and not {p["observation"] for p in unreached} & {p["observation"] for p in saved["positions"]}
    assert len(saved["positions"]) + len(unreached) <= 12  # the learner's information states in Kuhn poker
    assert all(p["visits"] == 0 and len(p["values"]) == 2 for p in unreached)
    assert [a["label"] for a in saved["unreached_agreement"]] == [result.before.label, result.after.label]
    for entry in saved["unreached_agreement"]:
        assert len(entry["answers"]) == len(unreached) and entry["agreed_positions"] <= entry["best_positions"]

    # scripts/learning_demo_positions.py asks the saved checkpoint again, in the report's positions.
    script = subprocess.run(
        [sys.executable, str(POSITIONS_SCRIPT), str(result.run_path / "learning_demo.json"), "--json", str(tmp_path / "p.json")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    again = json.loads((tmp_path / "p.json").read_text())[str(result.run_path / "learning_demo.json")]
    assert again["reached"]["answers"] == saved["agreement"][1]["answers"], script.stdout
    assert again["unreached"]["answers"] == saved["unreached_agreement"][1]["answers"]

    text = summary_text(result)
    for expected in ("before: untrained model", "after: sft, 1 epoch ", "random (reference)", "seeds 10000-10004",
                     "seeds 0-5", "wall time", f"plot: {result.plot}", "/5 = ", "times met",
                     "before: the demonstrator's answer in ", "an answer as good by its values in ", " never ",
                     "positions the demonstrator never reaches (in no demonstration): its answer in "):  # fmt: skip
        assert expected in text
    verdict = "learning shown: " if result.learning_shown() else "no learning shown: "
    assert any(line.startswith(verdict) for line in text.splitlines())
    assert any(line.startswith("before: mean return") for line in lines)


def test_command_line_prints_the_table_and_refuses_bad_settings(tiny_model_dir: Path, tmp_path: Path) -> None:
    import typer

    app = typer.Typer()
    app.command()(main)
    runner = CliRunner()
    sets = [f"model={tiny_model_dir}", "dtype=float32", "threads=1", "trainable_layers=1", "demo_episodes=4",
            "eval_episodes=3", "epochs=1", "batch_size=4"]  # fmt: skip
    args = ["--method", "sft", "--runs-root", str(tmp_path)] + [arg for item in sets for arg in ("--set", item)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "held-out games (seeds 10000-10002)" in result.output and "plot: " in result.output

    refused = runner.invoke(app, ["--method", "sft", *["--set", "eval_episode=3"]])
    assert refused.exit_code == 2 and "did you mean eval_episodes" in refused.output
    target = runner.invoke(app, ["--method", "sft", *["--set", "choice_target=worst"]])
    assert target.exit_code == 2 and "choose one of answer, best" in target.output
    overlap = runner.invoke(app, ["--method", "sft", *["--set", "demo_seed=9990", "--set", "demo_episodes=20"]])
    assert overlap.exit_code == 2 and "overlap the evaluation seeds" in overlap.output
    explore = runner.invoke(app, ["--method", "sft", *["--set", "demo_explore=1"]])
    assert explore.exit_code == 2 and "demo_explore is a probability per decision in [0, 1)" in explore.output


def test_evaluation_seed_offset_is_sfts() -> None:
    from llm_gym.agents.ppo_lora.train import EVAL_SEED_OFFSET

    assert SFT_EVAL_SEED_OFFSET == EVAL_SEED_OFFSET
