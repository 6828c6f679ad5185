"""``llm-gym demos`` on real envs: scripted Breakout with FIRE on reset (the lines replay exactly in the env), Trace
ground truth (each answer scores 1.0 in the env), MCTS on tic-tac-toe (the acting seat only), a ppo_lora checkpoint
through its play path, and bad input as one line."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import llm_gym
from llm_gym.cli import build_app
from llm_gym.demos import read_demos
from llm_gym.envs.catalog import make
from llm_gym.envs.trace.worked import worked_solution
from llm_gym.lm.prompts import chat_messages

runner = CliRunner()


def _demos(*args: str) -> None:
    result = runner.invoke(build_app(), ["demos", *args, "--json"])
    assert result.exit_code == 0, result.output


def _episodes(records: list) -> dict[int, list]:
    episodes: dict[int, list] = {}
    for record in records:
        episodes.setdefault(record.episode, []).append(record)
    return episodes


def test_scripted_breakout_demos_with_fire_on_reset_replay_exactly(tmp_path: Path) -> None:
    out = tmp_path / "demos.jsonl"
    _demos("--agent", "scripted", "--env", "LLMBreakout-text-v0", "--env-arg", "fire_on_reset=true",
           "--episodes", "2", "--seed", "5", "--max-steps", "150", "--num-envs", "2", "--out", str(out))  # fmt: skip
    records = read_demos(out)
    episodes = _episodes(records)
    assert sorted(episodes) == [0, 1] and all(len(steps) == 150 for steps in episodes.values())
    first = records[0]
    assert first.env_id == "LLMBreakout-text-v0" and first.env_args == {"fire_on_reset": True}
    assert first.source["agent"] == "scripted" and first.source["checkpoint"] is None
    assert first.source["llm_gym_version"] == llm_gym.__version__
    assert "ball x=" in first.messages[1]["content"], "FIRE on reset: the first observation has a ball in play"

    # Round trip: replaying each episode's actions in the env gives back every prompt, answer and reward.
    for index, steps in episodes.items():
        env = make("LLMBreakout-text-v0", fire_on_reset=True)
        obs, info = env.reset(seed=5 + index)
        assert [r.step for r in steps] == list(range(150)) and {r.seed for r in steps} == {5 + index}
        total = 0.0
        for record in steps:
            assert list(record.messages[:-1]) == chat_messages(env.unwrapped.instructions, obs)
            assert record.answer == info["action_names"][info["legal_actions"].index(record.action)]
            assert record.answer == env.unwrapped.game.scripted_action(info["game_state"])
            assert record.return_to_go == pytest.approx(steps[0].episode_return - total)
            obs, reward, _, _, info = env.step(record.action)
            assert reward == record.reward
            total += reward
        assert total == pytest.approx(steps[0].episode_return) and steps[0].episode_score == info["score"]


def test_trace_ground_truth_answers_score_one_in_the_env(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    _demos("--env", "Trace-v0", "--set", "level=1", "--episodes", "3", "--seed", "40", "--out", str(out))
    records = read_demos(out)
    assert len(records) == 3 and len({r.task_id for r in records}) == 3  # task ids drawn from the seeds
    env = gym.make("Trace-v0", level=1)
    for record in records:
        assert record.source["agent"] == "ground_truth" and record.env_args == {"level": 1}
        obs, _ = env.reset(seed=record.seed, options={"task_id": record.task_id})
        assert list(record.messages[:-1]) == chat_messages(env.unwrapped.instructions, obs)
        assert record.answer == env.unwrapped.task.expected
        _, reward, terminated, _, info = env.step(record.answer)
        assert reward == 1.0 == record.reward == record.episode_return and terminated and info["exact"]


def test_trace_worked_solutions_precede_the_expected_stdout_and_score_one(tmp_path: Path) -> None:
    out = tmp_path / "worked.jsonl"
    _demos("--env", "Trace-v0", "--env-arg", "level=1", "--set", "worked=true", "--episodes", "2", "--out", str(out))
    env = gym.make("Trace-v0", level=1)
    for record in read_demos(out):
        assert record.source["config"]["worked"] is True and record.source["agent"] == "ground_truth"
        env.reset(seed=record.seed, options={"task_id": record.task_id})
        work, _, stdout = record.answer.removeprefix("<think>\n").partition("\n</think>\n")
        task = env.unwrapped.task
        assert stdout == task.expected and work == worked_solution(task.program).text
        _, reward, *_ = env.step(record.answer)
        assert reward == 1.0 == record.reward


def test_trace_task_ids_given(tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    _demos("--env", "Trace-v0", "--env-arg", "level=2", "--task-ids", "100-101", "--episodes", "2", "--out", str(out))
    assert [r.task_id for r in read_demos(out)] == [100, 101]


def test_openspiel_demos_hold_the_acting_seats_decisions_only(tmp_path: Path) -> None:
    out = tmp_path / "ttt.jsonl"
    _demos("--agent", "mcts", "--set", "simulations=50", "--env", "OpenSpiel-tic_tac_toe-v0", "--episodes", "2",
           "--out", str(out))  # fmt: skip
    records = read_demos(out)
    env = make("OpenSpiel-tic_tac_toe-v0")
    for steps in _episodes(records).values():
        # tic-tac-toe: the learner makes at most 5 of the 9 moves, the opponent's are not demonstrations
        assert 3 <= len(steps) <= 5
        obs, info = env.reset(seed=steps[0].seed)
        for record in steps:
            assert record.messages[-2]["content"] == obs
            assert record.answer in info["action_names"]
            obs, _, _, _, info = env.step(record.action)


def test_a_checkpoint_plays_through_its_play_path(tmp_path: Path) -> None:
    from llm_gym.agents.ppo_lora.testing import tiny_config, train
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(model, total_steps=8, num_envs=2, num_steps=4, minibatch_size=8, update_epochs=1)
    summary, run = train(tmp_path / "run", "LLMBreakout-text-v0", config)
    out = tmp_path / "lm.jsonl"
    _demos("--agent", summary["checkpoint"], "--env", "LLMBreakout-text-v0", "--env-arg", "fire_on_reset=true",
           "--episodes", "1", "--max-steps", "20", "--out", str(out))  # fmt: skip
    records = read_demos(out)
    assert len(records) == 20 and records[0].source["agent"] == "ppo_lora"
    assert records[0].source["checkpoint"] == summary["checkpoint"]
    assert records[0].env_args == {"fire_on_reset": True}
    assert all(r.answer in ("NOOP", "FIRE", "RIGHT", "LEFT") for r in records)
    assert records[0].source["sampled"] is False

    # --sample: the same checkpoint draws its actions, seeded by --seed; the lines say so.
    def sampled(seed: int, name: str) -> list[str]:
        path = tmp_path / name
        _demos("--agent", summary["checkpoint"], "--env", "LLMBreakout-text-v0", "--env-arg", "fire_on_reset=true",
               "--episodes", "1", "--max-steps", "20", "--sample", "--seed", str(seed), "--out", str(path))  # fmt: skip
        lines = read_demos(path)
        assert all(r.source["sampled"] is True and r.seed == seed for r in lines)
        return [r.answer for r in lines]

    first = sampled(7, "s7.jsonl")
    # A tiny, barely trained model is close to uniform over 4 actions: 20 draws show more than one of them.
    assert len(set(first)) > 1
    assert sampled(7, "s7_again.jsonl") == first


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--agent", "scriptd", "--env", "LLMBreakout-text-v0"], "unknown agent 'scriptd'; did you mean 'scripted'"),
        (["--agent", "scripted", "--env", "LLMBrekout-text-v0"], "did you mean 'LLMBreakout-text-v0'"),
        (["--agent", "scripted", "--env", "LLMBreakout-vision-v0"],
         "demos hold text prompts only: use LLMBreakout-ascii-v0 or LLMBreakout-text-v0"),
        (["--agent", "ground_truth", "--env", "LLMBreakout-text-v0"], "ground truth demos come from Trace-v0"),
        (["--agent", "runs/none", "--env", "LLMBreakout-text-v0"], "no such checkpoint or run directory"),
        (["--env", "LLMBreakout-text-v0"], "demos needs --agent"),
        (["--agent", "scripted", "--env", "OpenSpiel-tic_tac_toe-v0"], "scripted agent knows Breakout and Pong"),
        (["--agent", "scripted", "--env", "LLMBreakout-text-v0", "--sample"],
         "scripted's policy has no sampled play"),
        (["--env", "Trace-v0", "--sample"], "nothing to sample: drop --sample"),
        (["--env", "Trace-v0", "--set", "worked=true"], "Trace level 1 only: add --env-arg level=1"),
        (["--env", "Trace-v0", "--set", "worked=yes", "--set", "level=1"], "--set worked='yes': give true or false"),
        (["--env", "Trace-v0", "--set", "depth=2"], "ground_truth takes only --set level=N"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "demos.jsonl"
    result = runner.invoke(build_app(), ["demos", *args, "--episodes", "1", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert needle in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not out.exists()


def test_an_existing_file_is_kept_unless_appended_to(tmp_path: Path) -> None:
    out = tmp_path / "demos.jsonl"
    args = ["demos", "--agent", "random", "--env", "LLMPong-text-v0", "--episodes", "1", "--max-steps", "3"]
    assert runner.invoke(build_app(), [*args, "--out", str(out)]).exit_code == 0
    result = runner.invoke(build_app(), [*args, "--out", str(out)])
    assert result.exit_code == 2 and "exists; pass --append" in result.output
    assert runner.invoke(build_app(), [*args, "--seed", "1", "--out", str(out), "--append"]).exit_code == 0
    assert [(r.seed, r.step) for r in read_demos(out)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_a_full_disk_or_an_unwritable_path_is_one_line_and_no_half_record(tmp_path: Path) -> None:
    """Disk full: demos left a 0-byte file (or half a line) and a traceback; ``--out /proc/x/d.jsonl`` too."""
    from small_disk import error_lines, on_small_disk

    result = runner.invoke(build_app(), ["demos", "--agent", "solver", "--env", "OpenSpiel-tic_tac_toe-v0",
                                         "--episodes", "1", "--out", "/proc/x/d.jsonl"])  # fmt: skip
    assert result.exit_code == 2 and "cannot write /proc/x/d.jsonl: No such file or directory" in result.stderr
    done = on_small_disk(tmp_path / "disk", "1m", f"""
        demos() {{ "$LLM_GYM" demos --agent solver --env OpenSpiel-tic_tac_toe-v0 "$@"; }}
        fill 100
        demos --episodes 2 --out "$DISK/none.jsonl"; echo "none=$?"
        rm "$DISK/.fill"; fill 20000
        demos --episodes 200 --out "$DISK/some.jsonl"; echo "some=$?"
        ls -a "$DISK"; cp "$DISK/some.jsonl" {tmp_path}/some.jsonl
    """)  # fmt: skip
    none, some = error_lines(done.stderr)
    assert "none.jsonl: No space left on device" in none and "some.jsonl: No space left on device" in some
    assert "none=2" in done.stdout and "some=2" in done.stdout and "none.jsonl" not in done.stdout.split("none=")[1]
    records = read_demos(tmp_path / "some.jsonl")  # every line whole: the failed episode was cut back
    assert records and records[-1].step == max(r.step for r in records if r.seed == records[-1].seed)
