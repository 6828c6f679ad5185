"""Trace-v0 as a Gymnasium env: tasks by id and level, rewards, info, data sets with broken programs."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import llm_gym  # noqa: F401  (registers Trace-v0)
from llm_gym.envs.trace.env import TraceEnv
from llm_gym.envs.trace.sandbox import SandboxLimits
from llm_gym.errors import ConfigError

QUICK = SandboxLimits(wall_seconds=3.0, cpu_seconds=1.0)  # a busy loop ends after 1 s of CPU


def _answer(expected: str) -> str:
    return f"<think>Let me trace it.</think>\n```output\n{expected}```"


def test_exact_answer_scores_one_and_info_explains() -> None:
    env = gym.make("Trace-v0")
    obs, info = env.reset(seed=3, options={"task_id": 11, "level": 2})
    assert obs.startswith("Program:\n```python\n") and "__DBG_1__" in obs and env.observation_space.contains(obs)
    assert info["task_id"] == 11 and info["level"] == 2 and info["valid"] and info["status"] == "ok"
    assert "expected" not in info, "the answer is not handed out before the step"
    expected = env.unwrapped.task.expected
    obs2, reward, terminated, truncated, info = env.step(_answer(expected))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["exact"] and info["expected"] == expected and info["diff"] == "" and info["partial"] == 1.0
    assert isinstance(env.unwrapped.instructions, str) and "__DBG_" in env.unwrapped.instructions
    env.close()


def test_random_text_scores_zero() -> None:
    env = gym.make("Trace-v0")
    env.action_space.seed(0)
    for task_id in range(3):
        env.reset(options={"task_id": task_id})
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        assert reward == 0.0 and terminated and not info["exact"] and info["diff"]
    env.close()


def test_task_id_and_level_decide_the_task() -> None:
    a, b = TraceEnv(), TraceEnv(level=3)
    obs_a, _ = a.reset(seed=1, options={"task_id": 42, "level": 3})
    obs_b, _ = b.reset(seed=99, options={"task_id": 42})
    assert obs_a == obs_b and a.task.expected == b.task.expected
    assert a.reset(options={"task_id": 43, "level": 3})[0] != obs_a
    mixed = TraceEnv()
    assert [mixed.reset(options={"task_id": t})[1]["level"] for t in range(4, 8)] == [1, 2, 3, 4]
    seeded = [TraceEnv().reset(seed=5)[0] for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_partial_scoring() -> None:
    env = TraceEnv(level=2, scoring="partial")
    env.reset(options={"task_id": 7})
    lines = env.task.expected.splitlines()
    _, reward, _, _, info = env.step("\n".join(lines[:-1]))
    assert reward == pytest.approx((len(lines) - 1) / len(lines)) and not info["exact"]


def test_step_needs_a_reset_and_render() -> None:
    env = TraceEnv(render_mode="ansi")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("x")
    env.reset(options={"task_id": 1})
    env.step("wrong")
    assert "--- expected" in env.render()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("again")


def test_bad_arguments_are_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="level"):
        TraceEnv(level=7)
    with pytest.raises(ConfigError, match="scoring"):
        TraceEnv(scoring="fuzzy")
    with pytest.raises(ConfigError, match="does not exist"):
        TraceEnv(dataset=tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"program": "print(1)"}\n{"prog": 1}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:2"):
        TraceEnv(dataset=bad)
    bad.write_text("not json\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1: not valid JSON"):
        TraceEnv(dataset=bad)


BROKEN = ["timeout", "error", "blocked", "output_limit", "memory", "process_limit", "blocked", "blocked", "error"]
ROWS = [
    {
        "program": "name = input()\ncount = int(input())\nfor i in range(count):\n    print(name, i)\n",
        "inputs": ["ada", "2"],
    },
    {"program": "while True:\n    pass\n"},
    {"program": "x = 1\nprint(x)\nprint(1 / 0)\n"},
    {"program": "open('/etc/llm-gym-escape', 'w').write('x')\n"},
    {"program": "while True:\n    print('spam')\n"},
    {"program": "x = bytearray(10**10)\n"},
    {"program": "import os\nwhile True:\n    os.fork()\n"},
    {"program": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"},
    {"program": "import socket\nsocket.create_connection(('127.0.0.1', 80))\n"},
    {"program": "def f(n):\n    return f(n + 1)\nf(0)\n"},
    {"program": "print('caf\u00e9')\n"},  # outside the observation charset
    {"program": "total = 0\nfor w in input().split():\n    total += len(w)\nprint(total)\n", "inputs": "to be or\n"},
]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "programs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    return path


def test_dataset_programs_with_stdin(dataset: Path) -> None:
    env = gym.make("Trace-v0", dataset=str(dataset), limits=QUICK)
    obs, info = env.reset(options={"task_id": 0})
    assert "Standard input:\n```\nada\n2\n```" in obs and info["source"] == str(dataset)
    assert "ada 0" in env.unwrapped.task.expected and "ada 1" in env.unwrapped.task.expected
    _, reward, *_ = env.step(env.unwrapped.task.expected)
    assert reward == 1.0
    env.close()


def test_broken_dataset_programs_are_skipped_with_their_status(dataset: Path) -> None:
    env = TraceEnv(dataset=dataset, limits=QUICK)
    obs, info = env.reset(options={"task_id": 1})
    last = len(ROWS) - 1
    assert info["task_id"] == last and info["valid"]
    statuses = [reason.split(":")[0] for _, reason in info["skipped"]]
    assert [t for t, _ in info["skipped"]] == list(range(1, last))
    assert statuses[: len(BROKEN)] == BROKEN
    assert "charset" in info["skipped"][-1][1]
    assert env.task.expected.endswith("6\n") and "__DBG_1__" in env.task.expected
    _, reward, *_ = env.step(env.task.expected)
    assert reward == 1.0, "the env keeps working after hostile programs"


def test_broken_dataset_programs_can_be_marked(dataset: Path) -> None:
    env = TraceEnv(dataset=dataset, limits=QUICK, on_invalid="mark")
    for task_id, status in enumerate([*BROKEN, "invalid"], start=1):
        _, info = env.reset(options={"task_id": task_id})
        assert info["status"] == status and not info["valid"] and info["detail"]
        _, reward, _, _, info = env.step(env.task.expected)
        assert reward == 0.0 and not info["exact"], "never silently wrong: an invalid task scores nothing"
    env.reset(options={"task_id": 0})
    assert env.step(env.task.expected)[1] == 1.0


def test_ground_truth_is_cached(tmp_path: Path) -> None:
    env = TraceEnv(level=1, cache_dir=tmp_path / "cache")
    env.reset(options={"task_id": 5})
    misses = env.cache.misses
    env.reset(options={"task_id": 5})
    assert env.cache.misses == misses and env.cache.hits >= 1
    assert list((tmp_path / "cache").rglob("*.json")), "ground truth written to disk"
    fresh = TraceEnv(level=1, cache_dir=tmp_path / "cache")
    fresh.reset(options={"task_id": 5})
    assert fresh.cache.misses == 0 and fresh.task.expected == env.task.expected


def test_a_huge_dataset_row_is_refused_before_any_work(tmp_path: Path) -> None:
    """A 12 MB row: refused by its length at once (injecting debug prints into it first took minutes)."""
    import time

    body = "x = 1\n" + "y = [" + ", ".join("1" for _ in range(400_000)) + "]\nprint(x)\n"
    path = tmp_path / "huge.jsonl"
    path.write_text(json.dumps({"program": body * 5}) + "\n" + json.dumps({"program": "print(2)\n"}) + "\n")
    env = TraceEnv(dataset=path, limits=QUICK, on_invalid="mark")
    start = time.monotonic()
    _, info = env.reset(options={"task_id": 0})
    assert time.monotonic() - start < 5.0
    assert not info["valid"] and "longer than 8000 characters" in info["detail"]
    _, info = env.reset(options={"task_id": 1})
    assert info["valid"]
