"""LMPolicy: score mode ranks each env's own legal actions (a varying set, as in OpenSpiel), generate mode parses
answers with the shared parser and counts what it cannot parse, text-action envs get the answer itself."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from llm_gym.actions import parse_action
from llm_gym.agent import EnvConfig
from llm_gym.envs.spaces import text_space
from llm_gym.envs.testing import register_one_answer_env
from llm_gym.errors import UnsupportedEnvError
from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend
from llm_gym.lm.policy import LMPolicy

NAMES = ("red", "green", "blue", "black")


class VaryingLegalEnv(gym.Env):
    """Each step only some of four colours are legal; the legal set changes with the step."""

    instructions = "Name a colour."
    noop_action = 0

    def __init__(self) -> None:
        self.action_space = gym.spaces.Discrete(4)
        self.observation_space = text_space(64)
        self.t = 0

    def _info(self) -> dict:
        legal = [0, 2, 3] if self.t % 2 == 0 else [1, 3]
        return {"legal_actions": legal, "action_names": [NAMES[a] for a in legal]}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return f"step {self.t}", self._info()

    def step(self, action):
        self.t += 1
        return f"step {self.t}", 0.0, self.t >= 4, False, self._info()


def is_non_empty(answer: str) -> float:
    return float(bool(answer))


gym.register("TestVaryingLegal-v0", entry_point=VaryingLegalEnv)
register_one_answer_env("TestEchoText-v0", is_non_empty, prompt="say it", instructions="Write something.")


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path):
    return make_backend("hf", str(tiny_model_dir), dtype="float32", threads=1)


def test_score_mode_takes_the_most_likely_legal_action(backend) -> None:
    policy = LMPolicy(backend, EnvConfig("TestVaryingLegal-v0"), mode="score", greedy=True)
    env = gym.make("TestVaryingLegal-v0")
    obs0, info0 = env.reset()
    obs1, _, _, _, info1 = env.step(0)
    actions = policy.act([obs0, obs1], [info0, info1])
    for action, obs, info in zip(actions, (obs0, obs1), (info0, info1), strict=True):
        assert action in info["legal_actions"]
        (scores,) = backend.score([ScoreRequest(VaryingLegalEnv.instructions, obs, tuple(info["action_names"]))])
        assert action == info["legal_actions"][int(np.argmax(scores))]
    sampled = LMPolicy(backend, EnvConfig("TestVaryingLegal-v0"), mode="score", greedy=False, seed=1)
    assert all(a in info0["legal_actions"] for a in sampled.act([obs0] * 20, [info0] * 20))


def test_generate_mode_counts_parse_failures_and_falls_back(backend) -> None:
    policy = LMPolicy(backend, EnvConfig("TestVaryingLegal-v0"), mode="generate", greedy=True, max_new_tokens=4)
    env = gym.make("TestVaryingLegal-v0")
    obs, info = env.reset()
    observations = [obs, "step 7", "what now"]
    actions = policy.act(observations, [info] * 3)
    completions = backend.generate(
        [GenerateRequest(VaryingLegalEnv.instructions, o) for o in observations], max_new_tokens=4, temperature=0.0
    )
    parsed = [parse_action(c.text, info["action_names"], info["legal_actions"]).action for c in completions]
    assert actions == [0 if p is None else p for p in parsed]  # unparsed answers fall back to the no-op (0)
    assert policy.decisions == 3 and policy.parse_failures == sum(p is None for p in parsed)


def test_text_action_envs_get_the_answer_text(backend) -> None:
    policy = LMPolicy(backend, EnvConfig("TestEchoText-v0"), mode="generate", greedy=True, max_new_tokens=5)
    (answer,) = policy.act(["say it"], [{}])
    assert isinstance(answer, str)
    with pytest.raises(UnsupportedEnvError, match="action_mode=generate"):
        LMPolicy(backend, EnvConfig("TestEchoText-v0"), mode="score")
