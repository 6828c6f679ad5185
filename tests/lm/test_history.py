"""Multi-turn history (``history=K``): the env wrapper that carries the turns, the chat turns in the prompt, the
cached system-prompt prefix still used under them (checked against a naive forward pass), and the LM policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import llm_gym  # noqa: F401
from llm_gym.envs.catalog import make
from llm_gym.envs.history import TURNS_KEY, TurnHistory
from llm_gym.errors import ConfigError, UnsupportedEnvError
from llm_gym.lm.backends import ScoreRequest, make_backend
from llm_gym.lm.policy import LMPolicy
from llm_gym.lm.prompts import PromptBuilder, chat_messages
from llm_gym.training.evaluation import run_episodes


def test_the_wrapper_keeps_the_last_k_turns_of_the_episode() -> None:
    env = make("LLMBreakout-text-v0", history=2)
    assert isinstance(env, TurnHistory)
    observation, info = env.reset(seed=0)
    assert info[TURNS_KEY] == ()
    seen = [observation]
    for action in (1, 2, 3):
        observation, _, _, _, info = env.step(action)
        seen.append(observation)
    assert [move for _, move in info[TURNS_KEY]] == ["RIGHT", "LEFT"]
    assert [text for text, _ in info[TURNS_KEY]] == seen[1:3]
    _, info = env.reset(seed=1)
    assert info[TURNS_KEY] == ()
    env.close()


def test_history_zero_or_bad_is_handled() -> None:
    assert not isinstance(make("LLMPong-v0", history=0), TurnHistory)
    with pytest.raises(ConfigError, match="history=-1"):
        make("LLMPong-v0", history=-1)
    with pytest.raises(ConfigError, match="not a number of turns"):
        make("LLMPong-v0", history="many")


def test_turns_become_chat_messages() -> None:
    messages = chat_messages("Rules.", "now", turns=(("first", "LEFT"), ("second", "FIRE")))
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "Rules."),
        ("user", "first"),
        ("assistant", "LEFT"),
        ("user", "second"),
        ("assistant", "FIRE"),
        ("user", "now"),
    ]
    folded = chat_messages("Rules.", "now", system_role=False, turns=(("first", "LEFT"),))
    assert folded[0] == {"role": "user", "content": "Rules.\n\nfirst"} and folded[-1]["content"] == "now"


@pytest.fixture(scope="module")
def hf(tiny_model_dir: Path):
    return make_backend("hf", str(tiny_model_dir), dtype="float32", threads=1, batch_size=4)


def test_history_prompts_keep_the_cached_prefix_and_score_exactly(hf) -> None:
    """Measured, not assumed: every history prompt starts with the builder's cached prefix tokens (so the packed
    forward reuses its KV cache), and the scores through that cache equal a naive full forward pass."""
    turns = [(), (("ball at 3", "LEFT"),), (("ball at 3", "LEFT"), ("ball at 5", "FIRE"))]
    requests = [ScoreRequest("Pick an action.", f"ball at {7 + i}", ("LEFT", "RIGHT", "FIRE"), t) for i, t in
                enumerate(turns)]  # fmt: skip
    builder, prefix = hf.prompt_builder("Pick an action.")
    encoded = builder.encode([r.observation for r in requests], [r.turns for r in requests])
    assert prefix is not None and prefix.length == len(builder.prefix_ids) > 0
    assert all(p.uses_prefix for p in encoded)
    assert len(encoded[2].ids) > len(encoded[1].ids) > len(encoded[0].ids)
    scores = hf.score(requests)
    for request, row, prompt in zip(requests, scores, encoded, strict=True):
        for choice, score in zip(request.choices, row, strict=True):
            ids = builder.choice_ids(choice)
            with torch.no_grad():
                logprobs = torch.log_softmax(hf.model(torch.tensor([prompt.ids + ids])).logits[0], -1)
            naive = sum(float(logprobs[len(prompt.ids) - 1 + i, t]) for i, t in enumerate(ids))
            assert score == pytest.approx(naive, abs=1e-4)
    assert not np.allclose(scores[0], scores[2]), "the history changed nothing"


def test_policy_with_history_plays_and_needs_the_wrapper(hf) -> None:
    from llm_gym.agent import EnvConfig

    policy = LMPolicy(hf, EnvConfig("LLMBreakout-text-v0"), history=2)
    assert policy.env_kwargs == {"history": 2}
    results = run_episodes(policy, EnvConfig("LLMBreakout-text-v0", {"history": 2}), 2, num_envs=2, max_steps=5)
    assert [r.length for r in results] == [5, 5]
    with pytest.raises(UnsupportedEnvError, match="history=2 needs envs made with history=2"):
        run_episodes(policy, EnvConfig("LLMBreakout-text-v0"), 1, max_steps=2)


def test_prompt_builder_without_chat_template_renders_turns(tiny_model_dir: Path) -> None:
    from llm_gym.lm.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    tokenizer.chat_template = None
    text = PromptBuilder(tokenizer, "Rules.").text("now", (("before", "LEFT"),))
    assert text == "Rules.\n\nbefore\n\nAnswer: LEFT\n\nnow\n\nAnswer: "


def test_the_lm_agent_takes_history_from_the_env_args(tiny_model_dir: Path) -> None:
    """``--env-arg history=K`` alone: the envs carry the turns, and the zero-shot agent's prompts show them."""
    from llm_gym.agent import EnvConfig
    from llm_gym.agents.lm_zero_shot import LMAgent, LMConfig

    agent = LMAgent(LMConfig(model=str(tiny_model_dir), dtype="float32", threads=1))
    assert agent.policy(EnvConfig("LLMBreakout-text-v0", {"history": 2})).history == 2
    assert agent.policy(EnvConfig("LLMBreakout-text-v0")).history == 0
