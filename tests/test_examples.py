"""The scripts in examples/ run as a user would run them, with tiny models in place of the default one (the agent
plugin skeleton is installed and trained by tests/test_wheel_install.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True, text=True, timeout=900, cwd=cwd
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", init_std=0.5)


def test_lm_policy_loop_plays_an_episode(tiny_model: Path, tmp_path: Path) -> None:
    out = run_example("lm_policy_loop.py", "--model", tiny_model, "--seed", "3", cwd=tmp_path)
    assert out.strip().splitlines()[-1].startswith("return ")
    assert len(EXAMPLES.joinpath("lm_policy_loop.py").read_text().splitlines()) <= 40


def test_openai_endpoint_eval_scores_a_served_model(tiny_model: Path, tmp_path: Path) -> None:
    from llm_gym.lm.openai_server import start_server

    httpd = start_server(str(tiny_model), name="tiny")
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        out = run_example(
            "openai_endpoint_eval.py", "--base-url", url, "--model", "tiny", "--episodes", "3", cwd=tmp_path
        )
    finally:
        httpd.shutdown()
    assert out.startswith("tiny on OpenSpiel-kuhn_poker-v0: mean return") and "over 3 episodes" in out


@pytest.mark.trl
def test_trl_recipe_trains_at_small_size(tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="trl is not installed (make install-trainers)")
    out = run_example("trl_grpo.py", "--model", tiny_model, "--steps", "2", "--out", tmp_path / "grpo", cwd=tmp_path)
    assert out.strip().splitlines()[-1].startswith("2 steps; mean reward per step:")
    assert (tmp_path / "grpo" / "adapter_config.json").is_file()
