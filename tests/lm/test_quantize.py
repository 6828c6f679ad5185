"""``quantize=int8`` on the ``hf`` backend, with torch's real dynamic int8 kernels on a tiny random Llama: scores stay
close to the float model's, generation works over the cached system prefix, and every misuse is one clear line."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.errors import ConfigError, UnknownNameError
from llm_gym.lm.backends import GenerateRequest, ScoreRequest, make_backend
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.quantize import check_quantize, quantize_model, quantized_linear_count

RULES = "You play a game. Answer with one action name."
CHOICES = ("NOOP", "FIRE", "RIGHT", "LEFT")
# Observations of different lengths, so the packed batch has padding as real ones do.
OBSERVATIONS = ("ball x=10 y=20", "ball x=11 y=22 moving down-left", "paddle x=99..114", "score 0, lives 4")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    # A moderate initialisation: the action log-likelihoods differ by a few nats, as a trained model's do.
    return make_tiny_model(tmp_path_factory.mktemp("tiny-int8"), layers=2, hidden=64, init_std=0.1)


@pytest.fixture(scope="module")
def backends(model_dir: Path) -> tuple[HFBackend, HFBackend]:
    float_backend = HFBackend(str(model_dir), dtype="float32", device="cpu", threads=1)
    int8_backend = HFBackend(str(model_dir), quantize="int8", device="cpu", threads=1)
    return float_backend, int8_backend


def requests() -> list[ScoreRequest]:
    return [ScoreRequest(RULES, observation, CHOICES) for observation in OBSERVATIONS]


def test_int8_replaces_every_decoder_linear_and_keeps_the_head_float(backends: tuple[HFBackend, HFBackend]) -> None:
    float_backend, int8_backend = backends
    assert quantized_linear_count(float_backend.model) == 0
    assert quantized_linear_count(int8_backend.model) == 2 * 7  # q, k, v, o, gate, up, down per layer
    head = int8_backend.model.get_output_embeddings()
    assert isinstance(head, torch.nn.Linear) and head.weight.dtype == torch.float32


def test_int8_scores_are_close_to_float_and_use_the_cached_prefix(backends: tuple[HFBackend, HFBackend]) -> None:
    float_backend, int8_backend = backends
    expected, got = float_backend.score(requests()), int8_backend.score(requests())
    _, prefix = int8_backend.prompt_builder(RULES)
    assert prefix is not None and prefix.length > 10, "the system prompt must be served from its KV cache"
    spread = max(float(np.ptp(row)) for row in expected)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(expected, got, strict=True))
    # Stated tolerance: on this model the choices' log-likelihoods (sums over 5-6 tokens) spread over several nats
    # and int8 (per-channel int8 weights, 7-bit dynamic activations) moves each by under half a nat (0.24 measured).
    assert spread > 2.0, "the float model should tell the choices apart for this test to mean anything"
    assert 0 < difference < 0.5, (difference, spread)
    assert [int(np.argmax(a)) for a in expected] == [int(np.argmax(b)) for b in got]


def test_int8_generates_answers_over_the_cached_prefix(backends: tuple[HFBackend, HFBackend]) -> None:
    _, int8_backend = backends
    prompts = [GenerateRequest(RULES, observation) for observation in OBSERVATIONS]
    first = int8_backend.generate(prompts, max_new_tokens=6, temperature=0.0)
    again = int8_backend.generate(prompts, max_new_tokens=6, temperature=0.0)
    assert [c.text for c in first] == [c.text for c in again], "greedy decoding is deterministic"
    assert all(1 <= c.num_tokens <= 6 and np.isfinite(c.logprob) and c.logprob <= 0 for c in first)
    sampled = int8_backend.generate(prompts, max_new_tokens=6, temperature=1.0, seed=3)
    assert len(sampled) == len(prompts) and all(c.token_ids for c in sampled)


def test_the_backend_factory_passes_quantize_through(model_dir: Path) -> None:
    backend = make_backend("hf", str(model_dir), quantize="int8", device="cpu", threads=1)
    assert quantized_linear_count(backend.model) == 14


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantize": "int9"}, "unknown quantize value 'int9'; did you mean 'int8'?"),
        ({"quantize": "int8", "device": "cuda"}, "quantize=int8 runs on the CPU only"),
        ({"quantize": "int8", "device": "cuda:1"}, "set device=cpu"),
        ({"quantize": "int8", "dtype": "bfloat16"}, "use dtype=float32 or auto"),
    ],
)
def test_misuse_is_one_line_before_any_model_is_loaded(options: dict, message: str) -> None:
    # The model does not exist: the option is refused before anything is loaded.
    with pytest.raises((ConfigError, UnknownNameError)) as caught:
        HFBackend("/nonexistent/model", **options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_model_with_lora_adapters_is_refused_until_merged(model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    from llm_gym.lm.models import load_causal_lm
    from llm_gym.lm.runtime import quiet_peft

    model, _ = load_causal_lm(str(model_dir), dtype="float32", device="cpu")
    with quiet_peft():
        with_lora = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with pytest.raises(ConfigError, match="trainable LoRA adapters .* merge the adapter first"):
        quantize_model(with_lora, "int8")
    merged = quantize_model(with_lora.merge_and_unload(), "int8")
    assert quantized_linear_count(merged) == 14
    with pytest.raises(ConfigError, match="float32 on the CPU"):
        quantize_model(copy.deepcopy(model).to(torch.bfloat16), "int8")


def test_none_changes_nothing() -> None:
    check_quantize("none", device="cuda", dtype="bfloat16")
    model = torch.nn.Linear(2, 2)
    assert quantize_model(model, "none") is model
