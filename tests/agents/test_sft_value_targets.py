"""sft's value targets (``value_gamma``): the undiscounted ``return_to_go`` by default, or each decision's return to
its episode's end discounted per env step, as PPO's value head learns it; demo trees (expected values) are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import value_targets
from llm_gym.demos.format import DemoRecord, read_demos
from llm_gym.demos.record import record_demos
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent


def _line(episode: int, step: int, return_to_go: float, **extra) -> DemoRecord:
    messages = ({"role": "user", "content": "obs"}, {"role": "assistant", "content": "a"})
    return DemoRecord(messages, "LLMBreakout-text-v0", episode=episode, step=step, return_to_go=return_to_go, **extra)


def test_targets_are_discounted_per_step_within_each_episode() -> None:
    # Episode 0: rewards 1, 0, 2 at steps 0-2 (returns-to-go 3, 2, 2); episode 1 interleaved, its step 1 without a
    # line (a decision whose action had no name): rewards 4 (step 0), 1 (step 1, no line), 0 (step 2).
    records = [_line(0, 0, 3.0), _line(1, 0, 5.0), _line(0, 1, 2.0), _line(1, 2, 0.0), _line(0, 2, 2.0)]
    assert value_targets(records, 1.0) == [3.0, 5.0, 2.0, 0.0, 2.0]
    # gamma 0.5: episode 0 exactly 1 + 0.5 * (0 + 0.5 * 2) = 1.5, 0 + 0.5 * 2 = 1, 2. Episode 1: the unlined step's
    # reward counts at step 0 (5 - 0 = 5, then 0.5^2 * 0).
    assert value_targets(records, 0.5) == pytest.approx([1.5, 5.0, 1.0, 0.0, 2.0])


def test_on_recorded_demos_the_targets_are_the_discounted_sum_of_the_rewards(tmp_path: Path) -> None:
    # The scripted tracker on shaped Breakout: a reward at many steps, a line at every step.
    env = EnvConfig("LLMBreakout-text-v0", {"reward_shaping": 10.0, "fire_on_reset": True})
    out = tmp_path / "demos.jsonl"
    record_demos(get_agent("scripted")().policy(env), env, 2, out, source={"agent": "scripted"}, max_steps=60)
    records = read_demos(out)
    gamma = 0.9
    expected: dict[tuple[int, int], float] = {}
    for episode in {r.episode for r in records}:
        lines = sorted((r for r in records if r.episode == episode), key=lambda r: r.step)
        assert [r.step for r in lines] == list(range(len(lines)))
        later = 0.0
        for r in reversed(lines):
            later = r.reward + gamma * later
            expected[(episode, r.step)] = later
    assert len({r.reward for r in records}) > 2  # shaping rewards of several sizes
    assert value_targets(records, gamma) == pytest.approx([expected[(r.episode, r.step)] for r in records])


def test_a_demo_tree_refuses_discounting_and_the_gamma_is_checked() -> None:
    tree = [_line(0, 0, 0.75, source={"agent": "solver", "walk": "every opponent reply"})]
    assert value_targets(tree, 1.0) == [0.75]
    with pytest.raises(ConfigError, match="value_gamma=1"):
        value_targets(tree, 0.99)
    for gamma in (0.0, 1.5):
        with pytest.raises(ValueError, match="value_gamma"):
            SFTConfig(value_gamma=gamma)
