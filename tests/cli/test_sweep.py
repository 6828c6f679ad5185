"""``llm-gym sweep`` and ``llm-gym plot`` end to end: a grid x seeds of tiny but real ppo_lora runs (each an
``llm-gym train`` process), the rerun that skips them, the killed run a rerun resumes, the results files, a Ray
sweep on a local Ray instance, and a PNG drawn from the runs' TensorBoard scalars."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from llm_gym.agents.ppo_lora.testing import tiny_settings
from llm_gym.testing import cli_command, invoke, kill_once_written

ENV = "LLMBreakout-text-v0"


def _sets(model: Path, **overrides: object) -> list[str]:
    # Two envs x 4 steps per update; episodes cut at 4 steps, so every rollout finishes some (a training curve).
    settings = tiny_settings(
        model, num_envs=2, num_steps=4, minibatch_size=8, update_epochs=1, lora_rank=4, kl_coef=0,
        max_episode_steps=4, total_steps=16, checkpoint_every=8, eval_every=0, eval_episodes=1, eval_max_steps=4,
        video=False,
    )  # fmt: skip
    settings.update(overrides)
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("model") / "tiny", layers=2, hidden=32)


@pytest.fixture(scope="module")
def swept(model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A 2-cell x 2-seed sweep, run once for the tests below."""
    root = tmp_path_factory.mktemp("sweeps")
    args = ["sweep", "--agent", "ppo_lora", "--env", ENV, "--grid", "learning_rate=1e-4,1e-3", "--seeds", "0,1"]
    args += [*_sets(model), "--runs-root", str(root), "--name", "lr", "--parallel", "2"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return root / "lr", args


@pytest.mark.timeout(400)
def test_sweep_runs_every_cell_and_seed_and_reports_them(swept: tuple[Path, list[str]]) -> None:
    sweep_dir, _ = swept
    runs = sorted(p.name for p in sweep_dir.iterdir() if (p / "config.json").is_file())
    assert runs == [f"learning_rate={lr}__seed_{s}" for lr in ("0.0001", "0.001") for s in (0, 1)]
    for name in runs:
        saved = json.loads((sweep_dir / name / "config.json").read_text())
        assert saved["config"]["learning_rate"] == float(name.split("=")[1].split("__")[0])
        assert saved["config"]["seed"] == int(name[-1])
        summary = json.loads((sweep_dir / name / "summary.json").read_text())
        assert summary["env_steps"] == 16 and summary["final_eval_return"] is not None
    rows = json.loads((sweep_dir / "results.json").read_text())
    assert [row["learning_rate"] for row in rows] == [1e-4, 1e-3]
    for row in rows:
        assert row["seeds"] == [0, 1] and len(row["eval_return"]["values"]) == 2
        assert row["eval_return"]["mean"] == pytest.approx(np.mean(row["eval_return"]["values"]))
        assert row["eval_return"]["ci95"] is not None
    with open(sweep_dir / "results.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [r["learning_rate"] for r in table] == ["0.0001", "0.001"] and table[0]["n_seeds"] == "2"
    assert json.loads((sweep_dir / "sweep.json").read_text())["seeds"] == [0, 1]


@pytest.mark.timeout(400)
def test_a_rerun_skips_finished_runs(swept: tuple[Path, list[str]]) -> None:
    sweep_dir, args = swept
    summaries = sorted(sweep_dir.glob("*/summary.json"))
    stamps = [p.stat().st_mtime_ns for p in summaries]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "4 finished, 0 to resume, 0 new" in result.output and "start " not in result.output
    assert [p.stat().st_mtime_ns for p in summaries] == stamps


@pytest.mark.timeout(400)
def test_a_rerun_with_other_settings_is_refused(swept: tuple[Path, list[str]]) -> None:
    _, args = swept
    result = invoke(*args, "--set", "gamma=0.9")
    assert result.exit_code == 2 and "holds a run with other settings" in result.stderr
    assert "gamma=0.99" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(400)
def test_plot_draws_seeds_as_a_band_from_real_scalars(swept: tuple[Path, list[str]], tmp_path: Path) -> None:
    from llm_gym.training.curves import group_runs, read_scalars

    sweep_dir, _ = swept
    steps, values = read_scalars(sweep_dir / "learning_rate=0.001__seed_0")["charts/episodic_return"]
    assert list(steps) == [8, 16] and np.isfinite(values).all()
    groups = group_runs(sorted(p for p in sweep_dir.iterdir() if (p / "config.json").is_file()))
    assert sorted(g.label for g in groups) == ["learning_rate=0.0001", "learning_rate=0.001"]
    out = tmp_path / "curves.png"
    result = invoke("plot", str(sweep_dir), "--metric", "charts/episodic_return", "--metric", "eval/mean_return",
                    "--out", str(out), "--smooth", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "charts/episodic_return: 2 curve(s)" in result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    assert Image.open(out).size[1] > Image.open(out).size[0] / 2  # two panels, one above the other
    wrong = invoke("plot", str(sweep_dir), "--metric", "charts/episodic_retrun", "--out", str(out))
    assert wrong.exit_code == 2 and "did you mean charts/episodic_return" in wrong.stderr


@pytest.mark.timeout(400)
def test_a_killed_run_is_resumed_by_the_sweep(model: Path, tmp_path: Path) -> None:
    sets = _sets(model, total_steps=32, checkpoint_every=8, keep_checkpoints=20)
    run_dir = tmp_path / "killed" / "default__seed_0"
    # The run the sweep would start, killed with SIGKILL as soon as its first checkpoint is complete.
    command = cli_command("train", "--agent", "ppo_lora", "--env", ENV, "--run-dir", str(run_dir), "--seed", "0")
    first = run_dir / "checkpoints" / "step_8" / "checkpoint.json"
    stderr = kill_once_written([*command, *sets], first, timeout=240)
    assert first.exists() and not (run_dir / "summary.json").exists(), stderr
    result = invoke("sweep", "--agent", "ppo_lora", "--env", ENV, *sets, "--runs-root", str(tmp_path), "--name",
                    "killed")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "0 finished, 1 to resume, 0 new" in result.output and "resume default__seed_0" in result.output
    log = (tmp_path / "killed" / "logs" / "default__seed_0.log").read_text()
    assert "resuming" in log and "from" + str(run_dir / "checkpoints" / "step_") in "".join(log.split())
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 32


@pytest.mark.timeout(400)
def test_sweep_on_a_local_ray_instance(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    result = invoke("sweep", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--grid", "total_steps=20,40",
                    "--seeds", "3", "--runs-root", str(tmp_path), "--ray")  # fmt: skip
    assert result.exit_code == 0, result.output
    sweep_dir = tmp_path / "OpenSpiel-tic_tac_toe-v0__random__sweep"
    for steps in (20, 40):
        summary = json.loads((sweep_dir / f"total_steps={steps}__seed_3" / "summary.json").read_text())
        assert summary["env_steps"] == steps
    assert "(Ray task)" in result.output and len(json.loads((sweep_dir / "results.json").read_text())) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--grid", "learnin_rate=1e-4,3e-4"],
            "unknown key 'learnin_rate' for PPOLoRAConfig; did you mean learning_rate",
        ),
        (["--grid", "learning_rate"], "--grid expects key=value1,value2,..."),
        (["--grid", "learning_rate=1e-4,,3e-4"], "--grid learning_rate needs values"),
        (["--grid", "learning_rate=fast"], "--grid learning_rate='fast' is not a valid float"),
        (["--grid", "num_envs=8", "--grid", "num_envs=16"], "--grid num_envs is given twice"),
        (["--grid", "num_envs=8,8"], "--grid num_envs repeats a value"),
        (["--grid", "seed=1,2"], "use --seeds 0,1,2"),
        (["--grid", "num_envs=0,8"], "num_envs must be >= 1"),
        (["--grid", "num_envs=8", "--set", "num_envs=16"], "num_envs is both in --grid and --set"),
        (["--seeds", "0,x"], "--seeds expects integers"),
        (["--set", "entropy_cof=0.1"], "did you mean entropy_coef"),
    ],
)
def test_bad_grids_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    result = invoke("sweep", "--agent", "ppo_lora", "--env", ENV, "--runs-root", str(tmp_path), *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not any(tmp_path.iterdir())  # nothing was started or written


def test_dry_run_lists_the_runs(tmp_path: Path) -> None:
    result = invoke("sweep", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--grid", "total_steps=10,20",
                    "--seeds", "0-2", "--runs-root", str(tmp_path), "--dry-run")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 cells x 3 seeds = 6 runs (0 finished, 0 to resume, 6 new)" in result.output
    assert "new    total_steps=20__seed_2" in result.output and not any(tmp_path.iterdir())
