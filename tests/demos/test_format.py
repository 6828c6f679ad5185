"""The demonstrations JSONL format: what a line holds, that writing then reading gives the same records, that
appending keeps earlier episodes, and that every malformed line is one error naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_gym.demos import DemoRecord, read_demos, write_records
from llm_gym.errors import ConfigError


def _record(step: int = 0, answer: str = "LEFT", **overrides) -> DemoRecord:
    values = dict(
        messages=(
            {"role": "system", "content": "You play Atari Breakout."},
            {"role": "user", "content": "score 0, lives 5. ball x=10 y=100 moving down."},
            {"role": "assistant", "content": answer},
        ),
        env_id="LLMBreakout-text-v0",
        env_args={"fire_on_reset": True},
        seed=7,
        episode=0,
        step=step,
        action=3,
        reward=1.0,
        return_to_go=2.0,
        episode_return=2.0,
        episode_score=2.0,
        source={"agent": "scripted", "config": {}, "checkpoint": None, "llm_gym_version": "0.1.0"},
    )
    return DemoRecord(**{**values, **overrides})


def test_a_line_is_the_agreed_json_object(tmp_path: Path) -> None:
    path = tmp_path / "demos.jsonl"
    assert write_records(path, [_record()]) == 1
    (line,) = path.read_text().splitlines()
    data = json.loads(line)
    assert [m["role"] for m in data["messages"]] == ["system", "user", "assistant"]
    assert data["messages"][-1]["content"] == "LEFT"
    assert data["env_id"] == "LLMBreakout-text-v0" and data["env_args"] == {"fire_on_reset": True}
    assert (data["seed"], data["episode"], data["step"], data["task_id"], data["action"]) == (7, 0, 0, None, 3)
    assert (data["reward"], data["return_to_go"], data["episode_return"], data["episode_score"]) == (1, 2, 2, 2)
    assert data["source"]["agent"] == "scripted" and data["source"]["llm_gym_version"] == "0.1.0"


def test_round_trip_and_append(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "demos.jsonl"
    first = [_record(0, choices=("NOOP", "FIRE", "RIGHT", "LEFT")), _record(1, answer="RIGHT")]
    second = [_record(0, episode=1, seed=8, task_id=3, action="42\n", answer="42\n")]
    write_records(path, first)
    write_records(path, second)  # a second episode appends
    records = read_demos(path)
    assert records == first + second
    assert records[1].answer == "RIGHT" and records[2].answer == "42\n"
    assert records[0].choices == ("NOOP", "FIRE", "RIGHT", "LEFT") and records[1].choices == ()
    assert records[0].prompt_messages == [dict(m) for m in first[0].messages[:2]]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not a demonstration line"),
        ("[1, 2]", "expected a JSON object"),
        ('{"env_id": "X"}', "missing messages"),
        ('{"messages": [], "env_id": "X"}', "at least a user and an assistant"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "env_id": "X"}',
         "end with a user message and the assistant"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}], "env_id": "X"}',
         "role must be one of"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "rewrd": 1}', "unknown key"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "reward": "high"}', "reward must be a number"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "choices": "b"}', "choices must be a list of action names"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "choices": ["a", "c"]}', "is not one of the choices"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "choices": ["a", "b"], "choice_values": [1]}', "choice_values has 1 numbers for 2 choices"),
        ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "env_id": "X",'
         ' "choices": ["a", "b"], "choice_values": [1, "x"]}', "choice_values must be a list of numbers"),
    ],
)  # fmt: skip
def test_a_malformed_line_names_the_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "demos.jsonl"
    write_records(path, [_record()])
    with open(path, "a") as handle:
        handle.write("\n" + line + "\n")  # a blank line is fine; the bad one is line 3
    with pytest.raises(ConfigError, match=rf"demos.jsonl:3: .*{reason}"):
        read_demos(path)


def test_a_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; write one with `llm-gym demos"):
        read_demos(tmp_path / "none.jsonl")
    with pytest.raises(ConfigError, match="is a folder; give the demonstrations file"):
        read_demos(tmp_path)


def test_demos_across_openspiel_games_carry_each_tasks_rules(tmp_path: Path) -> None:
    import gymnasium as gym

    from llm_gym.agent import EnvConfig
    from llm_gym.agents.baselines import RandomPolicy
    from llm_gym.demos.record import record_demos

    tic_tac_toe, kuhn = 2_200_000_000, 2_400_000_000
    out = tmp_path / "demos.jsonl"
    env = EnvConfig("OpenSpiel-v0", {"opponent": "random"})
    record_demos(RandomPolicy(0), env, 4, out, source={"agent": "random"}, task_ids=[tic_tac_toe, kuhn])
    rules = {}
    for task_id in (tic_tac_toe, kuhn):
        made = gym.make("OpenSpiel-v0", opponent="random")
        made.reset(seed=0, options={"task_id": task_id})
        rules[task_id] = made.unwrapped.instructions
    records = read_demos(out)
    assert {r.task_id for r in records} == {tic_tac_toe, kuhn}
    for record in records:  # the system prompt an LM agent would have seen for that task
        assert record.messages[0] == {"role": "system", "content": rules[record.task_id]}
