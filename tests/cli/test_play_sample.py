"""``llm-gym play --sample``: a policy with a distribution over actions samples from it (seeded), the report says
so, and a policy without one is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig, sampling_policy
from llm_gym.cli import build_app
from llm_gym.plugins import get_agent

runner = CliRunner()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def lm_policy(model_dir: Path, seed: int):
    agent_cls = get_agent("lm")
    config = agent_cls.Config(model=str(model_dir), dtype="float32", seed=seed)
    return agent_cls(config).policy(EnvConfig("LLMBreakout-text-v0"))


def actions_on_one_state(policy, copies: int = 64) -> list[int]:
    env = gym.make("LLMBreakout-text-v0")
    obs, info = env.reset(seed=0)
    return list(policy.act([obs] * copies, [info] * copies))


def test_sampled_play_draws_from_the_distribution_and_repeats_with_its_seed(model_dir: Path) -> None:
    greedy = actions_on_one_state(lm_policy(model_dir, seed=0))
    assert len(set(greedy)) == 1  # the same state, the most likely action every time

    sampled = actions_on_one_state(sampling_policy(lm_policy(model_dir, seed=0), "lm"))
    again = actions_on_one_state(sampling_policy(lm_policy(model_dir, seed=0), "lm"))
    other_seed = actions_on_one_state(sampling_policy(lm_policy(model_dir, seed=1), "lm"))
    # A tiny random model is close to uniform over the 4 actions: 64 draws show more than one of them.
    assert len(set(sampled)) > 1
    assert sampled == again and sampled != other_seed


def test_play_reports_sampled_play_and_refuses_a_policy_without_a_distribution(model_dir: Path) -> None:
    common = ["--env", "LLMPong-text-v0", "--episodes", "2", "--num-envs", "2", "--max-steps", "3", "--json"]
    result = runner.invoke(
        build_app(),
        ["play", "--agent", "lm", "--model", str(model_dir), "--set", "dtype=float32", "--sample", *common],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sampled"] is True

    result = runner.invoke(build_app(), ["play", "--agent", "scripted", "--sample", *common])
    assert result.exit_code != 0
    assert "scripted's policy has no sampled play" in result.output and "drop --sample" in result.output
    assert "Traceback" not in result.output
