"""``play --checkpoint`` and ``demos --agent CHECKPOINT`` with ``--config`` / ``--set`` / ``--model`` / ``--backend``
/ ``--seed``, through the real CLI (typer's runner): each one is applied where the checkpoint can play with it and
refused in one line (exit code 2) where it cannot, never dropped without a word. A tiny real ppo_lora run trained
through the CLI is the checkpoint. Training-only settings of an untrained agent (``play --agent NAME``) last."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.lm.testing import make_tiny_model
from llm_gym.runs import Run
from llm_gym.testing import error_line, invoke

PLAY = ("--episodes", "1", "--max-steps", "2", "--json")
TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 env steps of ppo_lora (LoRA r16 on every layer) on a tiny random model."""
    root = tmp_path_factory.mktemp("ppo_lora")
    model = make_tiny_model(root / "model", layers=2, hidden=32)
    config = tiny_config(model, total_steps=8, num_envs=2, num_steps=4, minibatch_size=8, trainable_layers=0)
    train(root / "run", "LLMBreakout-text-v0", config)
    return root / "run"


@pytest.fixture(scope="module")
def checkpoint(run_dir: Path) -> Path:
    return Run.open(run_dir).latest_checkpoint()


def test_another_base_model_is_refused_naming_the_checkpoints(checkpoint: Path, run_dir: Path) -> None:
    trained_on = json.loads((run_dir / "config.json").read_text())["config"]["model"]
    for args in (("--model", "smollm2-135m"), ("--set", "model=smollm2-135m")):
        line = error_line(invoke("play", "--checkpoint", str(checkpoint), *args, *PLAY))
        assert f"trained on the base model {trained_on!r}" in line and "drop --model" in line


def test_the_same_base_model_written_another_way_plays(checkpoint: Path, run_dir: Path) -> None:
    trained_on = Path(json.loads((run_dir / "config.json").read_text())["config"]["model"])
    spelled = os.path.relpath(trained_on)  # a relative path to the same directory
    result = invoke("play", "--checkpoint", str(checkpoint), "--model", spelled, "--backend", "hf", *PLAY)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agent"] == "ppo_lora"


def test_a_backend_that_cannot_serve_the_adapter_is_refused_with_the_way_to_serve_it(checkpoint: Path) -> None:
    line = error_line(invoke("play", "--checkpoint", str(checkpoint), "--backend", "vllm", *PLAY))
    assert "hf backend" in line and "llm-gym export --checkpoint" in line and "--backend vllm" in line


def test_settings_the_weights_fix_are_refused(checkpoint: Path, tmp_path: Path) -> None:
    line = error_line(invoke("play", "--checkpoint", str(checkpoint), "--set", "lora_rank=4", *PLAY))
    assert "lora_rank=16" in line and "drop lora_rank" in line
    config = tmp_path / "play.toml"
    config.write_text("trainable_layers = 1\n")
    assert "trainable_layers=0" in error_line(invoke("play", "--checkpoint", str(checkpoint), "--config", str(config)))


def test_the_config_file_is_read_not_ignored(checkpoint: Path, tmp_path: Path) -> None:
    config = tmp_path / "play.toml"
    config.write_text("thread = 1\n")
    line = error_line(invoke("play", "--checkpoint", str(checkpoint), "--config", str(config), *PLAY))
    assert str(config) in line and "unknown key 'thread'" in line and "did you mean threads" in line


def test_config_set_and_seed_are_what_the_checkpoint_plays_with(checkpoint: Path, tmp_path: Path) -> None:
    """demos writes the config it played with into every line: the file, then --set on top of it, applied."""
    config = tmp_path / "play.toml"
    config.write_text('threads = 1\naction_mode = "generate"\nmax_new_tokens = 3\n')
    out = tmp_path / "demos.jsonl"
    result = invoke("demos", "--agent", str(checkpoint), "--env", "LLMBreakout-text-v0", "--out", str(out),
                    "--episodes", "1", "--max-steps", "2", "--config", str(config), "--set", "max_new_tokens=4",
                    "--backend", "hf")  # fmt: skip
    assert result.exit_code == 0, result.output
    source = json.loads(out.read_text().splitlines()[0])["source"]
    assert source["checkpoint"] == str(checkpoint)
    played = source["config"]
    assert (played["threads"], played["action_mode"], played["max_new_tokens"]) == (1, "generate", 4)
    assert "vllm" in error_line(
        invoke("demos", "--agent", str(checkpoint), "--env", "LLMBreakout-text-v0", "--out", str(tmp_path / "x.jsonl"),
               "--backend", "vllm")
    )  # fmt: skip


def test_checkpoint_paths_that_are_not_a_checkpoint_say_what_to_pass(run_dir: Path, checkpoint: Path) -> None:
    missing = run_dir.parent / "missing"
    assert "does not exist" in error_line(invoke("play", "--checkpoint", str(missing), *PLAY))
    folder = error_line(invoke("play", "--checkpoint", str(run_dir / "checkpoints"), *PLAY))
    assert f"pass the run {run_dir}" in folder and checkpoint.name in folder
    inner = error_line(invoke("play", "--checkpoint", str(checkpoint / "adapter"), *PLAY))
    assert f"inside the checkpoint {checkpoint}" in inner
    model_dir = Path(json.loads((run_dir / "config.json").read_text())["config"]["model"])
    line = error_line(invoke("play", "--checkpoint", str(model_dir), *PLAY))
    assert "is a model directory" in line and f"--agent lm --model {model_dir}" in line
    assert not (model_dir / "checkpoints").exists(), "nothing is written into a folder that is not a run"


def test_a_run_of_an_agent_that_learns_nothing_takes_every_field_that_plays(tmp_path: Path) -> None:
    """A random run holds only its config: --seed and --set apply, but not total_steps (its train's budget, which
    play never reads); --model / --backend it has none of."""
    run = tmp_path / "random_run"
    trained = invoke("train", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--run-dir", str(run),
                     "--set", "total_steps=5")  # fmt: skip
    assert trained.exit_code == 0, trained.output
    result = invoke("play", "--checkpoint", str(run), "--seed", "7", "--set", "seed=3", *PLAY)
    assert result.exit_code == 0, result.output
    assert [e["seed"] for e in json.loads(result.stdout)["episodes"]] == [7]
    line = error_line(invoke("play", "--checkpoint", str(run), "--set", "total_steps=3", *PLAY))
    assert "total_steps=3 only affects training" in line and "drop it from --set/--config" in line
    assert "has no model to choose" in error_line(invoke("play", "--checkpoint", str(run), "--model", "m"))
    assert "has no backend to choose" in error_line(invoke("play", "--checkpoint", str(run), "--backend", "hf"))


# -- settings only training reads (marked training_only in the agent's config) --------------------------------------


def test_training_only_settings_are_refused_naming_them(checkpoint: Path, run_dir: Path, tmp_path: Path) -> None:
    """A learning rate, an epoch count ... change nothing in how a checkpoint plays: play and demos refuse them in
    one line that names them and says how to train with them instead, whether from --set or --config."""
    line = error_line(invoke("play", "--checkpoint", str(checkpoint), "--set", "learning_rate=1e-3", *PLAY))
    assert line == (
        f"error: learning_rate=0.001 only affects training, not how {checkpoint} plays: drop it from --set/--config "
        f"(to train on with it: llm-gym train --resume {run_dir} --set learning_rate=0.001)"
    )
    config = tmp_path / "play.toml"
    config.write_text("update_epochs = 3\nthreads = 1\n")  # threads plays (speed only); update_epochs trains
    line = error_line(invoke("demos", "--agent", str(checkpoint), "--env", "LLMBreakout-text-v0", "--out",
                             str(tmp_path / "d.jsonl"), "--config", str(config), "--set", "target_kl=0.05"))  # fmt: skip
    assert "update_epochs=3, target_kl=0.05 only affect training" in line and "drop them from --set/--config" in line
    assert "--set update_epochs=3 --set target_kl=0.05" in line and "threads" not in line
    assert not (tmp_path / "d.jsonl").exists(), "nothing is written before the settings check out"
    # num_envs only trains, and a resume cannot change it (the run's envs are in its checkpoint): no resume hint.
    line = error_line(invoke("play", "--checkpoint", str(checkpoint), "--set", "num_envs=4", *PLAY))
    assert "num_envs=4 only affects training" in line and "--num-envs sets the envs it plays" in line
    assert "--resume" not in line
    # A training setting equal to the run's own value changes nothing, so nothing is refused.
    same = invoke("play", "--checkpoint", str(checkpoint), "--set", "num_steps=4", "--set", "threads=1", *PLAY)
    assert same.exit_code == 0, same.output


def test_training_only_settings_of_an_untrained_agent_are_refused(tmp_path: Path) -> None:
    """``play --agent NAME`` / ``demos --agent NAME`` build an untrained policy, which reads no training-only field
    either: setting one is refused before anything loads; a speed-only one (threads) is not."""
    line = error_line(invoke("play", "--agent", "ppo_lora", "--env", TTT, "--set", "learning_rate=1e-3", *PLAY))
    assert line == (
        "error: learning_rate=0.001 only affects training, not how an untrained ppo_lora plays: drop it from "
        "--set/--config (to train with it: llm-gym train --agent ppo_lora --set learning_rate=0.001)"
    )
    line = error_line(invoke("play", "--agent", "random", "--env", TTT, "--set", "total_steps=5", *PLAY))
    assert line == "error: total_steps=5 only affects training, not how random plays: drop it from --set/--config"
    out = tmp_path / "demos.jsonl"
    line = error_line(invoke("demos", "--agent", "lm", "--env", TTT, "--out", str(out), "--set", "threads=1",
                             "--set", "num_envs=4"))  # fmt: skip
    assert "num_envs=4 only affects training, not how lm plays" in line and "--num-envs sets the envs it plays" in line
    assert not out.exists()
    played = invoke("play", "--agent", "random", "--env", TTT, "--set", "seed=3", *PLAY)
    assert played.exit_code == 0, played.output


def test_a_checkpoint_plays_held_out_seeds_like_bench(tmp_path: Path) -> None:
    """Seeds 0, 1, ... are the ones a run's training envs reset with; play --checkpoint evaluated on them."""
    from llm_gym.bench.suite import load_suite
    from llm_gym.training.evaluation import HELDOUT_SEED

    run = tmp_path / "random_run"
    assert invoke("train", "--agent", "random", "--env", "OpenSpiel-tic_tac_toe-v0", "--run-dir", str(run),
                  "--set", "total_steps=5").exit_code == 0  # fmt: skip
    result = invoke("play", "--checkpoint", str(run), "--episodes", "2", "--max-steps", "3", "--json")
    assert result.exit_code == 0, result.output
    assert [e["seed"] for e in json.loads(result.stdout)["episodes"]] == [HELDOUT_SEED, HELDOUT_SEED + 1]
    assert load_suite("smoke").splits["heldout"].seed == HELDOUT_SEED  # the seeds bench plays
