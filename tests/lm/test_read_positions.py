"""The last layer run at the read slots only gives the whole layer's numbers and gradients; layers of another shape
run whole."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from llm_gym.lm.packing import pack
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.read_positions import read_slots, reads_fewer_positions
from llm_gym.lm.split import SplitLM

OBSERVATIONS = ["ball x=12, paddle x=40", "no ball in play: FIRE to serve.\nactions: 0 NOOP, 1 FIRE", "z"]
CHOICES = [["NOOP", "FIRE", "RIGHT", "LEFT"], ["1", "10", "2"], ["NO", "NOOP", "NOOPS", "b"]]


@pytest.fixture(scope="module")
def packed(tiny_lm):
    """The tiny model split at layer 1, and a batch whose middle row does not use the cached prefix."""
    model, tokenizer = tiny_lm
    builder = PromptBuilder(tokenizer, "You play a game. Answer with one action name.")
    prompts = builder.encode(OBSERVATIONS)
    choices = [[builder.choice_ids(c) for c in row] for row in CHOICES]
    split = SplitLM(model, 1)
    prefix = split.bottom_prefix(builder.prefix_ids)
    batch = pack([p.ids for p in prompts], [True, False, True], choices, prefix.length, tokenizer.pad_token_id)
    return model, split, prefix, batch


def test_read_slots_point_at_the_same_slots(packed) -> None:
    _, _, _, batch = packed
    read = read_slots(batch)
    rows = batch.input_ids.shape[0]
    assert read.slots.shape[0] == rows and read.slots.shape[1] < batch.input_ids.shape[1]
    old_slots = batch.predict_slot.tolist()
    new_slots = read.slots[batch.predict_row, read.batch.predict_slot].tolist()
    assert new_slots == old_slots
    assert read.slots[torch.arange(rows), read.batch.last_prompt].tolist() == batch.last_prompt.tolist()


def _run(model, split: SplitLM, prefix, batch, reads_fewer: bool):
    split.reads_fewer = reads_fewer
    model.zero_grad(set_to_none=True)
    hidden = split.bottom(batch, prefix)
    out = split.top(hidden, batch, split.top_prefix(prefix))
    (out.seq_logprobs.sum() + out.last_hidden.square().sum()).backward()
    last = model.model.layers[-1]
    grads = {name: p.grad.clone() for name, p in last.named_parameters()}
    for p in model.parameters():
        p.grad = None
    return out, grads


def test_the_last_layer_at_the_read_slots_equals_the_whole_layer(packed) -> None:
    model, split, prefix, batch = packed
    assert split.reads_fewer, "the tiny Llama has the shape read_positions needs"
    trainable = {p: p.requires_grad for p in model.parameters()}
    for p in model.model.layers[-1].parameters():
        p.requires_grad_(True)
    try:
        whole, whole_grads = _run(model, split, prefix, batch, reads_fewer=False)
        read, read_grads = _run(model, split, prefix, batch, reads_fewer=True)
    finally:
        split.reads_fewer = True
        for p, flag in trainable.items():
            p.requires_grad_(flag)
    assert torch.allclose(read.seq_logprobs, whole.seq_logprobs, atol=1e-5)
    assert torch.allclose(read.token_logprobs, whole.token_logprobs, atol=1e-5)
    assert torch.allclose(read.last_hidden, whole.last_hidden, atol=1e-5)
    assert torch.allclose(read.predictor_entropy, whole.predictor_entropy, atol=1e-4)
    assert whole_grads.keys() == read_grads.keys() and len(whole_grads) == 9  # 4 projections, 3 MLP, 2 norms
    for name, grad in whole_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(read_grads[name], grad, atol=1e-5, rtol=1e-4), name


def test_a_layer_of_another_shape_runs_whole() -> None:
    # Qwen3 normalises queries and keys (q_norm, k_norm): keys computed the Llama way would be wrong.
    config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8)  # fmt: skip
    model = Qwen3ForCausalLM(config)
    assert not reads_fewer_positions(model.model.layers[-1])
    assert not SplitLM(model, 1).reads_fewer
