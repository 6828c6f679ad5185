"""Task samplers against hand-computed cases."""

from __future__ import annotations

import json
import random

import pytest

from llm_gym.agents.curriculum.samplers import FailureReplay, Stage, StagedCurriculum
from llm_gym.envs.tasks import (
    OptionsMix,
    TaskRange,
    TaskSampler,
    UniformTaskSampler,
    episode_score,
    is_success,
    options_key,
)
from llm_gym.errors import ConfigError

WIN, LOSS, DRAW = {"score": 1.0}, {"score": 0.0}, {"score": 0.5}


def test_task_range_parsing_and_errors():
    assert TaskRange.parse("0-999") == TaskRange(0, 999)
    assert TaskRange.parse("1_000_000_000-1_999_999_999") == TaskRange(10**9, 2 * 10**9 - 1)
    assert TaskRange.parse("7") == TaskRange(7, 7) == TaskRange.parse(7) == TaskRange.parse([7, 7])
    assert TaskRange(0, 9).size == 10 and 9 in TaskRange(0, 9) and 10 not in TaskRange(0, 9)
    assert TaskRange(0, 9).overlaps(TaskRange(9, 20)) and not TaskRange(0, 9).overlaps(TaskRange(10, 20))
    with pytest.raises(ConfigError, match="is empty"):
        TaskRange(5, 4)
    with pytest.raises(ConfigError, match="first-last"):
        TaskRange.parse("zero-nine")


def test_success_rule():
    assert is_success({"success": 1.0, "score": 0.0})  # an explicit verdict wins
    assert is_success({"score": 0.51}) and not is_success(DRAW) and not is_success(LOSS)
    assert is_success({"return": 2.0}) and not is_success({"return": 0.0})
    assert episode_score({"score": 1.7}) == 1.0 and episode_score({"return": -1.0}) == 0.0


def test_uniform_draws_the_same_ids_as_random_randint_and_resumes_exactly():
    sampler = UniformTaskSampler(TaskRange(100, 199), {"opponent": "random"}, seed=3)
    assert isinstance(sampler, TaskSampler)
    reference = random.Random(3)
    first = [sampler.next_options() for _ in range(5)]
    assert first == [{"opponent": "random", "task_id": reference.randint(100, 199)} for _ in range(5)]
    state = json.loads(json.dumps(sampler.state_dict()))
    expected = [sampler.next_options() for _ in range(5)]
    again = UniformTaskSampler(TaskRange(100, 199), {"opponent": "random"}, seed=99)
    again.load_state_dict(state)
    assert [again.next_options() for _ in range(5)] == expected


def test_options_mix_draws_uniformly_tallies_per_choice_and_resumes_exactly():
    choices = [{"opponent": "random"}, {"opponent": "mcts", "mcts": {"simulations": 10}}]
    mix = OptionsMix(choices, seed=5)
    assert isinstance(mix, TaskSampler) and not hasattr(mix, "evaluation_tasks")  # evaluation keeps the env's own
    reference = random.Random(5)
    drawn = [mix.next_options() for _ in range(200)]
    assert drawn == [choices[reference.randrange(2)] for _ in range(200)]
    assert 80 < sum(d["opponent"] == "mcts" for d in drawn) < 120
    drawn[0]["opponent"] = "changed"  # a caller's copy, not the mix's own
    assert mix.next_options()["opponent"] in ("random", "mcts")
    for options, result in ((choices[0], 1.0), (choices[0], 0.0), (choices[1], -1.0), ({"opponent": "x"}, 1.0)):
        mix.report(dict(options), {"return": result})
    assert [(t["episodes"], t["mean_return"], t["share"]) for t in mix.tallies()] == [(2, 0.5, 0.5), (1, -1.0, 0.5)]
    state = json.loads(json.dumps(mix.state_dict()))
    expected = [mix.next_options() for _ in range(5)]
    again = OptionsMix(choices, seed=99)
    again.load_state_dict(state)
    assert [again.next_options() for _ in range(5)] == expected and again.tallies() == mix.tallies()
    with pytest.raises(ConfigError, match="same episode_options"):
        OptionsMix(choices[:1]).load_state_dict(state)
    weighted = OptionsMix([choices[0], choices[0], choices[0], choices[1]], seed=1)  # random three times as often
    assert 130 < sum(weighted.next_options()["opponent"] == "random" for _ in range(200)) < 170
    assert [(t["options"], t["share"]) for t in weighted.tallies()] == [(choices[0], 0.75), (choices[1], 0.25)]
    with pytest.raises(ConfigError, match="at least one"):
        OptionsMix([])
    with pytest.raises(ConfigError, match="must be a dict"):
        OptionsMix(["random"])


def _stages(window: int = 4, demote_below: float | None = None) -> list[Stage]:
    return [
        Stage("easy", TaskRange(0, 9), {"opponent": "random"}, threshold=0.75, window=window),
        Stage("hard", TaskRange(10, 19), {"opponent": "mcts"}, threshold=0.5, window=2, demote_below=demote_below),
    ]


def test_stage_advances_exactly_when_the_window_reaches_the_threshold():
    curriculum = StagedCurriculum(_stages(), seed=0)
    easy = {"opponent": "random", "task_id": 3}
    for stats in (WIN, LOSS, WIN):  # window not full yet: no decision
        curriculum.report(easy, stats)
        assert curriculum.stage == 0
    curriculum.report(easy, DRAW)  # 2/4 = 0.5 < 0.75
    assert curriculum.stage == 0
    curriculum.report(easy, WIN)  # window = LOSS WIN DRAW WIN: 0.5
    assert curriculum.stage == 0
    curriculum.report(easy, WIN)  # WIN DRAW WIN WIN: 0.75 -> advance
    assert curriculum.stage == 1 and curriculum.current.name == "hard" and not curriculum.window
    assert curriculum.events[-1] == {"stage": 1, "name": "hard", "episode": 6, "kind": "advance"}
    options = curriculum.next_options()
    assert options["opponent"] == "mcts" and 10 <= options["task_id"] <= 19
    curriculum.report(easy, LOSS)  # handed out before the change: not counted in the new stage
    assert not curriculum.window and curriculum.episodes == 7
    curriculum.report({"opponent": "mcts", "task_id": 12}, WIN)
    curriculum.report({"opponent": "mcts", "task_id": 12}, WIN)
    assert curriculum.stage == 1  # the last stage never advances


def test_demotion_below_the_floor():
    curriculum = StagedCurriculum(_stages(window=1, demote_below=0.5), seed=0)
    curriculum.report({"opponent": "random", "task_id": 0}, WIN)
    assert curriculum.stage == 1
    hard = {"opponent": "mcts", "task_id": 10}
    curriculum.report(hard, WIN)
    curriculum.report(hard, LOSS)  # window WIN LOSS = 0.5, not below 0.5: stays
    assert curriculum.stage == 1
    curriculum.report(hard, LOSS)  # LOSS LOSS = 0.0 < 0.5
    assert curriculum.stage == 0 and curriculum.events[-1]["kind"] == "demote"


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([], "at least one stage"),
        (
            [Stage("a", TaskRange(0, 9)), Stage("b", TaskRange(5, 20))],
            "stage 'b': task range 5-20 overlaps stage 'a' \\(0-9\\); start it after 9",
        ),
        ([Stage("a", TaskRange(0, 9)), Stage("a", TaskRange(10, 20))], "stage 'a' appears twice"),
    ],
)
def test_bad_stage_lists(stages, message):
    with pytest.raises(ConfigError, match=message):
        StagedCurriculum(stages)


def test_bad_stage_values():
    with pytest.raises(ConfigError, match="stage 'x': threshold 1.5 is outside \\[0, 1\\]"):
        Stage("x", TaskRange(0, 1), threshold=1.5)
    with pytest.raises(ConfigError, match="stage 'x': window 0"):
        Stage("x", TaskRange(0, 1), window=0)
    with pytest.raises(ConfigError, match="demote_below"):
        Stage("x", TaskRange(0, 1), threshold=0.5, demote_below=0.6)


def test_same_range_with_other_options_is_not_an_overlap():
    StagedCurriculum(
        [Stage("r", TaskRange(0, 9), {"opponent": "random"}), Stage("m", TaskRange(0, 9), {"opponent": "mcts"})]
    )


def test_resume_restores_stage_window_and_draws():
    curriculum = StagedCurriculum(_stages(), seed=5)
    for stats in (WIN, LOSS, WIN):
        curriculum.report(curriculum.next_options(), stats)
    state = json.loads(json.dumps(curriculum.state_dict()))
    expected = [curriculum.next_options() for _ in range(3)]
    again = StagedCurriculum(_stages(), seed=0)
    again.load_state_dict(state)
    assert list(again.window) == [True, False, True] and [again.next_options() for _ in range(3)] == expected
    renamed = [Stage("other", TaskRange(0, 9)), Stage("hard", TaskRange(10, 19))]
    with pytest.raises(ConfigError, match="stage file the run was started with"):
        StagedCurriculum(renamed).load_state_dict(state)


def test_failures_enter_successes_leave_and_fresh_episodes_only_reach_the_base():
    base = StagedCurriculum(_stages(), seed=0)
    replay = FailureReplay(base, capacity=10, replay_share=1.0, seed=0)
    failed = {"opponent": "random", "task_id": 4}
    replay.report(failed, {"score": 0.25})
    assert len(replay) == 1 and base.episodes == 1
    assert replay.next_options() == failed  # share 1.0: always a replay once the buffer has something
    replay.report(failed, {"score": 0.5})  # a draw is not a success: stays, priority now 0.5
    assert replay.buffer[options_key(failed)]["score"] == 0.5 and base.episodes == 1
    assert replay.next_options() == failed
    replay.report(failed, WIN)
    assert len(replay) == 0 and replay.counts["solved"] == 1 and base.episodes == 1
    fresh = replay.next_options()  # empty buffer: fresh
    assert replay.counts == {"fresh": 1, "replayed": 2, "added": 1, "solved": 1, "evicted": 0}
    replay.report(fresh, WIN)
    assert base.episodes == 2 and len(replay) == 0


def test_replay_share_and_priority_rates():
    base = UniformTaskSampler(TaskRange(0, 10**6), seed=1)
    replay = FailureReplay(base, capacity=10, replay_share=0.3, seed=2)
    hopeless, close = {"task_id": -1}, {"task_id": -2}
    replay.report(hopeless, {"score": 0.0})  # priority 1.0
    replay.report(close, {"score": 0.5})  # priority 0.5
    draws = [replay.next_options() for _ in range(6000)]
    replayed = [d for d in draws if d["task_id"] < 0]
    # Binomial(6000, 0.3): sd 35; priorities 1.0 : 0.5 -> 2/3 of replays are the hopeless task (sd ~0.011).
    assert abs(len(replayed) / 6000 - 0.3) < 0.02
    assert abs(sum(d == hopeless for d in replayed) / len(replayed) - 2 / 3) < 0.04
    assert replay.counts["replayed"] == len(replayed)


def test_capacity_evicts_the_least_urgent():
    replay = FailureReplay(UniformTaskSampler(TaskRange(0, 9)), capacity=2, seed=0)
    replay.report({"task_id": 1}, {"score": 0.2})
    replay.report({"task_id": 2}, {"score": 0.4})
    replay.report({"task_id": 3}, {"score": 0.0})  # evicts task 2 (priority 0.6, the lowest)
    assert [e["options"]["task_id"] for e in replay.buffer.values()] == [1, 3]
    replay.report({"task_id": 4}, {"score": 0.45})  # priority 0.55 is below everyone's: not kept
    assert [e["options"]["task_id"] for e in replay.buffer.values()] == [1, 3]
    assert replay.counts["evicted"] == 1


def test_replay_state_round_trip_continues_exactly():
    def build(seed: int) -> FailureReplay:
        return FailureReplay(StagedCurriculum(_stages(), seed=seed), capacity=5, replay_share=0.5, seed=seed)

    replay = build(7)
    for i in range(6):
        options = replay.next_options()
        replay.report(options, LOSS if i % 2 else WIN)
    pending = replay.next_options()  # handed out, not reported before the checkpoint
    state = json.loads(json.dumps(replay.state_dict()))
    expected = [replay.next_options() for _ in range(8)]
    again = build(0)
    again.load_state_dict(state)
    assert again.buffer == replay.buffer and again.pending == json.loads(json.dumps(state["pending"]))
    assert [again.next_options() for _ in range(8)] == expected
    third = build(0)
    third.load_state_dict(state)
    third.report(pending, LOSS)  # an episode in flight at the checkpoint still counts as what it was
    assert not third.pending and options_key(pending) in third.buffer


def test_bad_replay_arguments():
    with pytest.raises(ConfigError, match="replay_share"):
        FailureReplay(UniformTaskSampler(TaskRange(0, 1)), replay_share=1.3)
    with pytest.raises(ConfigError, match="capacity"):
        FailureReplay(UniformTaskSampler(TaskRange(0, 1)), capacity=0)
