"""verifiers' own evaluation (``vf-eval``) runs an llm-gym environment against a local OpenAI-compatible server (a tiny
model behind llm_gym.lm.openai_server on loopback): whole multi-turn episodes, the same prompts as llm-gym's agents,
the same parser and reward as an in-process replay of the model's answers, and a held-out split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="verifiers is not installed (make install-trainers)")

from llm_gym.actions import TextActions  # noqa: E402
from llm_gym.envs.catalog import make  # noqa: E402
from llm_gym.integrations.episode import TextEpisode  # noqa: E402
from llm_gym.lm.openai_server import start_server  # noqa: E402
from llm_gym.lm.testing import make_tiny_model  # noqa: E402

pytestmark = pytest.mark.verifiers

VF_EVAL = str(Path(sys.executable).parent / "vf-eval")
ENV_ID = "OpenSpiel-tic_tac_toe-v0"


def in_process_replay(seed: int, answers: list[str]) -> list[tuple[str, float, bool]]:
    """The answers stepped in-process as llm-gym's LM agents step an env: (observation, reward, done), reset first."""
    env = TextActions(make(ENV_ID))
    observation, _ = env.reset(seed=seed)
    out = [(observation, 0.0, False)]
    for answer in answers:
        observation, reward, terminated, truncated, _ = env.step(answer)
        out.append((observation, float(reward), terminated or truncated))
    env.close()
    return out


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory):
    model_dir = make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", init_std=0.5)
    httpd = start_server(str(model_dir), name="tiny")
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_load_environment_splits_seeds_into_train_and_held_out() -> None:
    from llm_gym.integrations.verifiers_env import LLMGymTaskset, load_environment

    env = load_environment(ENV_ID, split="eval", train_size=5, eval_size=3, opponent="random")
    assert env.config.taskset.env_args == {"opponent": "random"}
    seeds = {}
    for split in ("train", "eval"):
        config = env.config.taskset.model_copy(update={"split": split})
        seeds[split] = [task.data.seed for task in LLMGymTaskset(config).load()]
    assert seeds == {"train": [0, 1, 2, 3, 4], "eval": [5, 6, 7]}
    task = next(iter(LLMGymTaskset(env.config.taskset).load()))
    first = TextEpisode(ENV_ID, {"opponent": "random"}).reset(seed=5)
    assert [task.data.system_prompt, task.data.prompt] == [m["content"] for m in first.messages]


def test_vf_eval_plays_whole_episodes_scored_like_in_process(model_server: str, tmp_path: Path) -> None:
    command = [
        VF_EVAL,
        "llm-gym-verifiers",
        "--env.taskset.env-id",
        ENV_ID,
        "--env.taskset.split",
        "eval",
        "--env.taskset.eval-size",
        "3",
        "-m",
        "tiny",
        "--client.base-url",
        model_server,
        "--no-push",
        "--no-rich",
        "-o",
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (traces_file,) = tmp_path.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert len(episodes) == 3 and all(e["ok"] for e in episodes)
    seeds = set()
    for episode in episodes:
        (trace,) = episode["traces"]
        info = trace["info"]["llm_gym"]
        seeds.add(info["seed"])
        assert info["done"] and info["env_id"] == ENV_ID
        messages = [node["message"] for node in trace["nodes"]]
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        assert len(answers) == info["steps"]
        replay = in_process_replay(info["seed"], answers)
        assert trace["rewards"]["llm_gym_return"]["score"] == pytest.approx(sum(r for _, r, _ in replay))
        # The prompts are llm-gym's: the env's rules, then each observation as the user's turn.
        first = TextEpisode(ENV_ID).reset(seed=info["seed"]).messages
        assert messages[:2] == first
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert users == [text for text, _, done in replay if not done]
    assert seeds == {64, 65, 66}  # the held-out split: after the 64 training seeds
