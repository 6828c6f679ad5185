"""The shared stepping path: vector envs (sync and async) driven by EnvStepper, episode statistics, task samplers,
and snapshots that continue a stepper exactly."""

from __future__ import annotations

import numpy as np
import pytest

from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.agents.curriculum.samplers import FailureReplay
from llm_gym.envs.catalog import EnvConfig
from llm_gym.envs.tasks import TaskRange, UniformTaskSampler
from llm_gym.stepping import EnvStepper, make_vector_env

PONG = EnvConfig("LLMPong-text-v0")


def _play(stepper: EnvStepper, policy: ScriptedPolicy, steps: int) -> list[tuple]:
    trace = []
    for _ in range(steps):
        actions = policy.act(stepper.observations, stepper.infos)
        result = stepper.step(actions)
        trace.append((tuple(stepper.observations), tuple(result.rewards), tuple(e.index for e in result.finished)))
    return trace


def test_statistics_come_back_with_each_finished_episode() -> None:
    stepper = EnvStepper(make_vector_env(PONG, 2, max_episode_steps=25), seed=3)
    stepper.reset()
    policy, finished, returns = ScriptedPolicy(PONG), [], np.zeros(2)
    for _ in range(60):
        result = stepper.step(policy.act(stepper.observations, stepper.infos))
        returns += result.rewards
        for episode in result.finished:
            finished.append(episode)
            assert episode.stats.length == 25 and episode.stats.truncated
            assert episode.stats.episode_return == pytest.approx(returns[episode.slot])
            assert episode.seed == 3 + episode.index
            returns[episode.slot] = 0.0
        assert set(result.final_observations) == {e.slot for e in result.finished}
    stepper.close()
    assert sorted(e.index for e in finished) == list(range(4))


def test_a_sampler_picks_each_episode_and_hears_how_it_went() -> None:
    sampler = FailureReplay(UniformTaskSampler(TaskRange.parse("0-3"), seed=1), replay_share=0.5, seed=2)
    stepper = EnvStepper(make_vector_env(PONG, 3, max_episode_steps=10), seed=0, sampler=sampler)
    stepper.reset()
    seen = []
    for _ in range(40):
        for episode in stepper.step(ScriptedPolicy(PONG).act(stepper.observations, stepper.infos)).finished:
            assert episode.final_info["task_id"] == episode.options["task_id"]
            seen.append(episode.options["task_id"])
    stepper.close()
    # Cut after 10 steps, Pong episodes score nothing: every one is a failure the replay buffer keeps.
    assert len(seen) == 12 and set(seen) <= {0, 1, 2, 3}
    assert sampler.counts["fresh"] + sampler.counts["replayed"] == 15  # 3 running now
    assert len(sampler) == len(set(seen)) and sampler.counts["replayed"] > 0


# ALE's snapshot does not hold the previous action that sticky actions repeat, so with the default
# repeat_action_probability=0.25 a restored Atari env can drift from the original; deterministic ALE is exact.
EXACT_PONG = EnvConfig("LLMPong-text-v0", {"repeat_action_probability": 0.0})


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_restored_stepper_continues_exactly(kind: str) -> None:
    sampler = UniformTaskSampler(TaskRange.parse("0-3"), seed=4)
    first = EnvStepper(make_vector_env(EXACT_PONG, 2, kind=kind, max_episode_steps=30), seed=5, sampler=sampler)
    first.reset()
    policy = ScriptedPolicy(PONG)
    _play(first, policy, 20)
    state = first.state_dict()
    expected = _play(first, policy, 45)
    first.close()

    second = EnvStepper(
        make_vector_env(EXACT_PONG, 2, kind=kind, max_episode_steps=30),
        seed=5,
        sampler=UniformTaskSampler(TaskRange.parse("0-3"), seed=99),
    )
    exact = second.load_state_dict(state)
    restarted = list(second.options)
    got = _play(second, policy, 45)
    second.close()
    assert restarted == state["options"]  # the sampler's tasks in progress go on (or restart: their options)
    if kind == "sync":
        assert exact and got == expected
    else:  # async envs live in other processes: no snapshots, so new episodes of the same tasks, numbered on
        assert not exact and state["snapshots"] is None and got[0][2] == ()
        assert second.episode_index == [None, None] or min(i for i in second.episode_index if i is not None) >= 2


# -- start spread (ppo_lora's start_spread) -----------------------------------------------------------------------

BREAKOUT = EnvConfig("LLMBreakout-text-v0")


def _frames(stepper: EnvStepper) -> list[int]:
    return [int(info["episode_frame_number"]) for info in stepper.infos]


@pytest.mark.parametrize("text_actions", [False, True])
def test_spread_plays_each_env_its_drawn_number_of_random_legal_steps(text_actions: bool) -> None:
    stepper = EnvStepper(make_vector_env(BREAKOUT, 4, text_actions=text_actions), seed=5)
    stepper.reset()
    start = _frames(stepper)
    report = stepper.spread(12, np.random.default_rng(0))
    assert report.steps == np.random.default_rng(0).integers(13, size=4).tolist()  # the draws come first
    assert report.episodes_ended == 0  # 12 steps of the raw game: no life is lost
    # ALE's frameskip is 4: each env advanced exactly its own draw, the others sat the steps out
    assert [f - s for f, s in zip(_frames(stepper), start, strict=True)] == [4 * k for k in report.steps]
    spread_observations = list(stepper.observations)
    stepper.close()
    if not text_actions:  # the same draws as action names reach the same states
        again = EnvStepper(make_vector_env(BREAKOUT, 4, text_actions=True), seed=5)
        again.reset()
        again.spread(12, np.random.default_rng(0))
        assert again.observations == spread_observations
        again.close()


def test_spread_restarts_episodes_that_end_and_reports_none() -> None:
    stepper = EnvStepper(make_vector_env(BREAKOUT, 2, max_episode_steps=3), seed=0)
    stepper.reset()
    report = stepper.spread(10, np.random.default_rng(1))
    assert report.episodes_ended == sum(k // 3 for k in report.steps) > 0
    assert stepper.next_episode == 2 + report.episodes_ended  # numbered on, as any restart is
    stepper.close()


def test_spread_refuses_a_task_sampler_and_envs_without_legal_actions() -> None:
    sampled = EnvStepper(make_vector_env(PONG, 1), sampler=UniformTaskSampler(TaskRange.parse("0-3"), seed=4))
    sampled.reset()
    with pytest.raises(ValueError, match="task sampler"):
        sampled.spread(4, np.random.default_rng(0))
    sampled.close()
    trace = EnvStepper(make_vector_env(EnvConfig("Trace-v0"), 1))
    trace.reset()
    with pytest.raises(ValueError, match="no legal actions"):
        trace.spread(4, np.random.default_rng(2))  # draws >= 1 step for its one env
    trace.close()


# One id per family (and the OpenSpiel id that picks any game by task id): a group's episodes start from the same
# state, exactly, and replay exactly while they take the same actions (docs/guides/groups.md, "Exact groups").
GROUP_ENVS = [
    EnvConfig("LLMBreakout-text-v0"),
    EnvConfig("LLMPong-ascii-v0"),
    EnvConfig("OpenSpiel-kuhn_poker-v0"),
    EnvConfig("OpenSpiel-tic_tac_toe-v0"),
    EnvConfig("OpenSpiel-v0"),
    EnvConfig("Trace-v0", {"level": 1}),
]


def _first_legal(infos: list[dict]) -> list:
    return [info["legal_actions"][0] if info.get("legal_actions") else 0 for info in infos]


@pytest.mark.parametrize("env", GROUP_ENVS, ids=lambda e: e.env_id)
def test_a_group_starts_from_one_state_and_replays_it_exactly(env: EnvConfig) -> None:
    text = env.env_id.startswith("Trace")
    task_ids = [3 * 10**8 + 1, 7 * 10**8] if env.env_id == "OpenSpiel-v0" else None
    stepper = EnvStepper(make_vector_env(env, 6, max_episode_steps=12), seed=40, group_size=3, task_ids=task_ids)
    stepper.reset()
    assert stepper.episode_index == [0, 1, 2, 3, 4, 5]
    for group in (range(0, 3), range(3, 6)):
        first = group[0]
        assert all(stepper.observations[i] == stepper.observations[first] for i in group)
        assert all(stepper.options[i] == stepper.options[first] for i in group)
    if task_ids:
        assert [stepper.options[i]["task_id"] for i in (0, 3)] == task_ids
    trajectories: dict[int, list] = {}
    while not all(len(trajectories.get(i, [])) and trajectories[i][-1] == "end" for i in range(6)):
        active = stepper.active
        infos = [stepper.infos[i] for i in active]
        actions = ["answer"] * len(active) if text else _first_legal(infos)
        result = stepper.step(actions)
        for i in range(6):
            trajectories.setdefault(i, [])
            if i in active:
                trajectories[i].append((stepper.observations[i], float(result.rewards[i])))
        for episode in result.finished:
            assert episode.seed == 40 + episode.index // 3
            trajectories[episode.slot].append("end")
        if not stepper.active:
            break
    stepper.close()
    # The same actions from the same start: the same episode, observation by observation.
    assert trajectories[0] == trajectories[1] == trajectories[2]
    assert trajectories[3] == trajectories[4] == trajectories[5]


def test_an_env_waits_for_its_group_and_the_group_restarts_together() -> None:
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    stepper = EnvStepper(make_vector_env(env, 4, max_episode_steps=1), seed=7, group_size=2, episodes=6)
    stepper.reset()
    # Env 0 plays one step (cut there); env 1 sits the step out: env 0 waits, idle, for it.
    result = stepper.step([stepper.infos[0]["legal_actions"][0]] + [-1, -1, -1])
    assert [e.index for e in result.finished] == [0]
    assert stepper.active == [1, 2, 3]
    result = stepper.step(_first_legal([stepper.infos[i] for i in stepper.active]))
    assert sorted(e.index for e in result.finished) == [1, 2, 3]
    # Group 0's envs restarted together as group 2 (episodes 4, 5, seed 7 + 2); envs 2 and 3 wait: 6 episodes asked.
    assert stepper.episode_index == [4, 5, None, None]
    assert stepper.observations[0] == stepper.observations[1]
    result = stepper.step(_first_legal([stepper.infos[i] for i in stepper.active]))
    assert sorted((e.index, e.seed) for e in result.finished) == [(4, 9), (5, 9)]
    assert stepper.done
    stepper.close()


def test_group_size_must_divide_the_envs() -> None:
    with pytest.raises(ValueError, match="group_size must divide"):
        EnvStepper(make_vector_env(EnvConfig("OpenSpiel-kuhn_poker-v0"), 4), group_size=3)
