"""The hf-vision backend on a tiny random Idefics3 (SmolVLM's architecture) with a locally built processor: score
mode equals a naive forward pass per (observation, action), the system prompt's cache and each observation's image
are computed once, generation is batched and seeded, and the `lm` agent plays a vision env through `--backend hf`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend

RULES = "You play Pong. Answer with one action."
ACTIONS = ("NOOP", "FIRE", "UP", "DOWN", "UPFIRE", "DOWNFIRE")


@pytest.fixture(scope="module")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.vision.testing import make_tiny_vision_model

    return make_tiny_vision_model(tmp_path_factory.mktemp("tiny-vlm"), init_std=0.5)


@pytest.fixture(scope="module")
def backend(tiny_vlm_dir: Path):
    return make_backend("hf", str(tiny_vlm_dir), dtype="float32", threads=1, batch_size=3)


def _observations(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"image": rng.integers(0, 256, (210, 160, 3), dtype=np.uint8), "text": f"ball at {i}"} for i in range(n)]


def test_hf_hands_an_image_text_model_to_the_vision_backend(backend) -> None:
    assert backend.name == "hf-vision"
    builder, prefix = backend.prompt_builder(RULES)
    assert prefix is not None and prefix.length == len(builder.prefix_ids) > 10
    prompt = builder.encode(_observations(1))[0]
    assert prompt.uses_prefix
    image_id = backend.tokenizer.convert_tokens_to_ids("<image>")
    assert prompt.ids.count(image_id) == 16  # (64 / 8)**2 / 2**2 image tokens, none cut
    assert prompt.images["pixel_values"].shape == (1, 1, 3, 64, 64)


def test_score_equals_a_naive_forward_per_action(backend) -> None:
    observations = _observations(4)  # 4 observations, batch size 3: two chunks
    scores = backend.score([ScoreRequest(RULES, o, ACTIONS) for o in observations])
    builder, _ = backend.prompt_builder(RULES)
    for observation, got in zip(observations, scores, strict=True):
        prompt = builder.encode([observation])[0]
        expected = []
        for action in ACTIONS:
            answer = builder.choice_ids(action)
            with torch.no_grad():
                logits = backend.model(input_ids=torch.tensor([prompt.ids + answer]), **prompt.images).logits
            logprobs = logits[0].log_softmax(-1)
            n = len(prompt.ids)
            expected.append(sum(float(logprobs[n - 1 + k, t]) for k, t in enumerate(answer)))
        np.testing.assert_allclose(got, expected, atol=1e-4)
    assert not np.allclose(scores[0], scores[1])  # the image matters


def test_earlier_turns_come_before_the_observation(backend) -> None:
    builder, _ = backend.prompt_builder(RULES)
    observation = _observations(1)[0]
    turns = (("ball at 7", "UP"), ("ball at 8", "DOWN"))
    text = builder.text(observation, turns)
    assert text.index("ball at 7") < text.index("UP") < text.index("ball at 8") < text.index("<image>")
    with_turns = backend.score([ScoreRequest(RULES, observation, ACTIONS, turns)])[0]
    without = backend.score([ScoreRequest(RULES, observation, ACTIONS)])[0]
    assert builder.encode([observation], [turns])[0].uses_prefix and not np.allclose(with_turns, without)


def test_the_vision_encoder_runs_once_per_observation(backend) -> None:
    calls = []
    vision = backend.model.model.vision_model
    handle = vision.register_forward_hook(
        lambda module, args, kwargs, out: calls.append(kwargs["pixel_values"].shape[0]), with_kwargs=True
    )
    try:
        backend.score([ScoreRequest(RULES, o, ACTIONS) for o in _observations(3)])
    finally:
        handle.remove()
    assert calls == [3]  # one encoder call for the batch, one image per observation, whatever the number of actions


def test_generate_is_batched_seeded_and_takes_several_images(backend) -> None:
    observations = _observations(2)
    two_images = {"images": [o["image"] for o in observations], "text": "before and after"}
    requests = [GenerateRequest(RULES, o) for o in [*observations, two_images, "text only"]]
    first = backend.generate(requests, max_new_tokens=6, temperature=1.0, seed=3)
    again = backend.generate(requests, max_new_tokens=6, temperature=1.0, seed=3)
    assert [c.text for c in first] == [c.text for c in again]
    assert all(0 < c.num_tokens <= 6 and np.isfinite(c.logprob) for c in first)
    greedy = backend.generate(requests[:1], max_new_tokens=6, temperature=0.0)[0]
    alone = backend.generate(requests[:1] * 3, max_new_tokens=6, temperature=0.0)
    assert all(c.text == greedy.text for c in alone)


def test_lm_agent_plays_a_vision_env(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llm_gym.cli import build_app

    result = CliRunner().invoke(
        build_app(),
        [
            "play",
            "--agent",
            "lm",
            "--model",
            str(tiny_vlm_dir),
            "--env",
            "LLMPong-vision-v0",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--max-steps",
            "5",
            "--set",
            "dtype=float32",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["env_id"] == "LLMPong-vision-v0" and [e["length"] for e in report["episodes"]] == [5, 5]
