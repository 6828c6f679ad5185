"""scripts/ppo_lora_start_values.py builds each seed's fresh value head with a training run's own draws: the value
it reports for a seed is what that seed's run (at learning rate 0, so its checkpoint keeps the starting head) gives
the same states; and with ``value_input=unit`` every seed starts near zero."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.agents.ppo_lora.value_head import load_value_head_file

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ppo_lora_start_values.py"
spec = importlib.util.spec_from_file_location("ppo_lora_start_values", SCRIPT)
start_values = importlib.util.module_from_spec(spec)
spec.loader.exec_module(start_values)  # type: ignore[union-attr]

KUHN = "OpenSpiel-kuhn_poker-v0"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("start-values-lm"), layers=2, hidden=32)


def test_a_seeds_reported_start_is_its_training_runs_starting_head(tmp_path: Path, model_dir: Path) -> None:
    shape = dict(num_envs=2, num_steps=4, minibatch_size=8, lora_rank=4)
    rows, states = start_values.starting_values(tiny_config(model_dir, **shape), EnvConfig(KUHN), [1, 2])
    assert [r["seed"] for r in rows] == [1, 2] and rows[0]["value_mean"] != rows[1]["value_mean"]

    summary, _ = train(
        tmp_path / "run", KUHN, tiny_config(model_dir, seed=2, learning_rate=0.0, total_steps=8, **shape)
    )
    head = load_value_head_file(Path(summary["checkpoint"]) / VALUE_HEAD_FILE, 32, "cpu")
    with torch.no_grad():
        assert float(head(states).mean()) == pytest.approx(rows[1]["value_mean"], abs=1e-6)


def test_the_command_writes_its_report_and_unit_heads_start_near_zero(tmp_path: Path, model_dir: Path) -> None:
    out = tmp_path / "unit.json"
    args = ["--model", str(model_dir), "--env", KUHN, "--seeds", "0-3", "--num-envs", "2", "--num-steps", "2"]
    start_values.main([*args, "--set", "dtype=float32", "--set", "value_input=unit", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["states"] == 4 and [r["seed"] for r in report["seeds"]] == [0, 1, 2, 3]
    assert report["hidden"]["norm"] > 0 and report["hidden"]["spread_between_states_rms"] >= 0
    # A head on a unit vector with weights of std 1/sqrt(32): a few tenths at most, whatever the hidden state's size.
    assert all(abs(r["value_mean"]) < 4 * 32**-0.5 for r in report["seeds"])
