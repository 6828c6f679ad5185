"""openenv-core's own client plays whole episodes against ``llm-gym serve``: an Atari, an OpenSpiel game (by its
id and by an affinetes task id of OpenSpiel-v0) and the Trace id, each step's observation, reward and end equal to
the same answers played in-process on the same seed and task id; sessions in parallel never mix."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (make install-trainers)")
from openenv import GenericEnvClient  # noqa: E402
from serve_helpers import in_process_replay  # noqa: E402  (tests/serve/serve_helpers.py)

from llm_gym.serve.app import ServerLimits  # noqa: E402
from llm_gym.serve.environment import ServeSpec  # noqa: E402
from llm_gym.serve.wire import decode_image  # noqa: E402

pytestmark = pytest.mark.serve


def play(base_url: str, seed: int, task_id: int | None = None, garbage_every: int = 7) -> tuple[list, list[str], float]:
    """A seeded policy through the client: mostly a legal action's name, some answers by id, some garbage the parser
    cannot read (the no-op and the penalty). Returns per step (text, reward, done), the answers, and the return."""
    rng = np.random.default_rng(seed)
    client = GenericEnvClient(base_url=base_url).sync()
    with client:
        reset_args = {"seed": seed} if task_id is None else {"seed": seed, "task_id": task_id}
        result = client.reset(**reset_args)
        obs = result.observation
        steps, answers, total = [(obs["text"], 0.0, False)], [], 0.0
        assert obs["messages"][-1] == {"role": "user", "content": obs["text"]}
        while not result.done:
            names, legal = obs["action_names"], obs["legal_actions"]
            k = len(answers)
            if not names:  # a text-action env (Trace): the answer itself
                answer, action = f"line {seed}\n", {"text": f"line {seed}\n"}
            elif k % garbage_every == garbage_every - 1:
                answer, action = "no idea", {"text": "no idea"}
            elif k % 3 == 1:
                index = int(rng.integers(len(legal)))
                answer, action = names[index], {"action_id": legal[index]}
            else:
                answer = str(names[int(rng.integers(len(names)))])
                action = {"text": answer}
            result = client.step(action)
            obs = result.observation
            answers.append(answer)
            total += result.reward
            steps.append((obs["text"], result.reward, result.done))
    return steps, answers, total


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "task_id"),
    [
        ("LLMBreakout-v0", {}, None),
        ("OpenSpiel-tic_tac_toe-v0", {"opponent": "mcts", "mcts": {"simulations": 20}}, None),
        ("OpenSpiel-v0", {}, 200000003),
        ("Trace-v0", {}, 12),
    ],
)
def test_client_plays_whole_episodes_like_in_process(serve_env, env_id: str, env_kwargs: dict, task_id) -> None:
    with serve_env(ServeSpec(env_id, env_kwargs)) as (url, app):
        for seed in (0, 1):
            steps, answers, total = play(url, seed, task_id)
            assert steps[-1][2], "the episode ran to its end"
            assert steps == in_process_replay(env_id, env_kwargs, seed, task_id, answers)
            assert total == pytest.approx(sum(r for _, r, _ in steps))
        assert app.state.server.sessions_opened == 2


def test_sessions_in_parallel_never_mix(serve_env) -> None:
    results: dict[int, tuple] = {}
    with serve_env(ServeSpec("OpenSpiel-tic_tac_toe-v0"), ServerLimits(max_sessions=8)) as (url, app):

        def one(seed: int) -> None:
            results[seed] = play(url, seed)

        threads = [threading.Thread(target=one, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert app.state.server.sessions_opened == 8
    assert sorted(results) == list(range(8))
    for seed, (steps, answers, _) in results.items():
        assert steps == in_process_replay("OpenSpiel-tic_tac_toe-v0", {}, seed, None, answers)


def test_vision_observation_carries_the_frame_exactly(serve_env) -> None:
    from llm_gym.envs.catalog import make

    spec = ServeSpec("LLMPong-vision-v0", {"image_size": 64})
    with serve_env(spec) as (url, _), GenericEnvClient(base_url=url).sync() as client:
        obs = client.reset(seed=4).observation
    env = make("LLMPong-vision-v0", image_size=64)
    reference, _ = env.reset(seed=4)
    env.close()
    assert obs["text"] == reference["text"]
    assert np.array_equal(decode_image(obs["image"]), reference["image"])


def test_history_puts_earlier_turns_in_the_prompt(serve_env) -> None:
    spec = ServeSpec("OpenSpiel-tic_tac_toe-v0", {"history": 2})
    with serve_env(spec) as (url, _), GenericEnvClient(base_url=url).sync() as client:
        first = client.reset(seed=0).observation
        second = client.step({"text": first["action_names"][4]}).observation
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert second["messages"][1]["content"] == first["text"]
    assert second["messages"][2]["content"] == first["action_names"][4]
