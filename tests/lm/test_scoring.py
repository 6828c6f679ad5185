"""Score mode is exact: the packed, prefix-cached, trie-shared forward pass gives the same log-likelihoods as a naive
full forward of every prompt + action, and padding never leaks between rows."""

from __future__ import annotations

import pytest
import torch

from llm_gym.lm.forward import compute_prefix, packed_forward
from llm_gym.lm.packing import pack
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.scoring import categorical_entropy, categorical_kl, categorical_logprobs, choice_table
from llm_gym.lm.split import SplitLM

OBSERVATIONS = ["ball x=12, paddle x=40", "no ball in play: FIRE to serve.\nactions: 0 NOOP, 1 FIRE", "z"]
CHOICES = [["NOOP", "FIRE", "RIGHT", "LEFT"], ["1", "10", "2"], ["NO", "NOOP", "NOOPS", "b"]]


def naive_loglik(model, prompt: list[int], continuation: list[int]) -> float:
    ids = torch.tensor([prompt + continuation])
    logprobs = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    return sum(float(logprobs[len(prompt) - 1 + i, t]) for i, t in enumerate(continuation))


@pytest.fixture(scope="module")
def setup(tiny_lm):
    model, tokenizer = tiny_lm
    builder = PromptBuilder(tokenizer, "You play a game. Answer with one action name.")
    prompts = builder.encode(OBSERVATIONS)
    choices = [[builder.choice_ids(c) for c in row] for row in CHOICES]
    return model, tokenizer, builder, prompts, choices


def _packed_batch(setup):
    """The cached system prompt and every prompt packed with its choices (the prefix used where a prompt has it)."""
    model, tokenizer, builder, prompts, choices = setup
    prefix = compute_prefix(model, builder.prefix_ids)
    batch = pack(
        [p.ids for p in prompts], [p.uses_prefix for p in prompts], choices, prefix.length, tokenizer.pad_token_id
    )
    return prefix, batch


def test_prompts_share_the_cached_prefix(setup) -> None:
    _, _, builder, prompts, _ = setup
    assert len(builder.prefix_ids) > 10
    assert all(p.uses_prefix and p.ids[: len(builder.prefix_ids)] == builder.prefix_ids for p in prompts)


@torch.no_grad()
def test_packed_scores_equal_naive_forward_per_action(setup) -> None:
    model, _, _, prompts, choices = setup
    prefix, batch = _packed_batch(setup)
    out = packed_forward(model, batch, prefix)
    naive = [naive_loglik(model, p.ids, c) for p, row in zip(prompts, choices, strict=True) for c in row]
    assert out.seq_logprobs.tolist() == pytest.approx(naive, abs=1e-4)
    # Actions sharing a first token share trie nodes: fewer query slots than prompt + all action tokens.
    assert batch.input_ids.shape[1] < max(
        len(p.ids) - prefix.length + sum(map(len, r)) for p, r in zip(prompts, choices, strict=True)
    )


@torch.no_grad()
def test_batch_equals_single_rows_with_padding_masked(setup) -> None:
    model, tokenizer, builder, prompts, choices = setup
    prefix = compute_prefix(model, builder.prefix_ids)
    together = packed_forward(
        model, pack([p.ids for p in prompts], [True] * 3, choices, prefix.length, tokenizer.pad_token_id), prefix
    )
    alone = []
    for prompt, row in zip(prompts, choices, strict=True):
        single = packed_forward(model, pack([prompt.ids], [True], [row], prefix.length, tokenizer.pad_token_id), prefix)
        alone.extend(single.seq_logprobs.tolist())
        assert single.token_logprobs.shape[0] == sum(map(len, row))
    assert together.seq_logprobs.tolist() == pytest.approx(alone, abs=1e-5)
    # The row that does not use the cached prefix (prefix keys masked out) gives the same numbers.
    mixed = packed_forward(
        model,
        pack([p.ids for p in prompts], [True, False, True], choices, prefix.length, tokenizer.pad_token_id),
        prefix,
    )
    assert mixed.seq_logprobs.tolist() == pytest.approx(alone, abs=1e-4)


@torch.no_grad()
def test_split_forward_equals_full_forward(setup) -> None:
    model, _, builder, _, _ = setup
    prefix, batch = _packed_batch(setup)
    full = packed_forward(model, batch, prefix)
    for split_layer in (0, 2):
        split = SplitLM(model, split_layer)
        bottom_prefix = split.bottom_prefix(builder.prefix_ids)
        hidden = split.bottom(batch, bottom_prefix)
        out = split.top(hidden, batch, split.top_prefix(bottom_prefix))
        assert out.seq_logprobs.tolist() == pytest.approx(full.seq_logprobs.tolist(), abs=1e-4)
        assert torch.allclose(out.last_hidden, full.last_hidden, atol=1e-4)


def test_split_passes_gradients_through_the_prefix(setup) -> None:
    model, tokenizer, builder, prompts, choices = setup
    split = SplitLM(model, 1)
    bottom_prefix = split.bottom_prefix(builder.prefix_ids)
    batch = pack([p.ids for p in prompts], [True] * 3, choices, bottom_prefix.length, tokenizer.pad_token_id)
    hidden = split.bottom(batch, bottom_prefix)
    weight = model.model.layers[2].self_attn.k_proj.weight
    out = split.top(hidden, batch, split.top_prefix(bottom_prefix))
    out.seq_logprobs.sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_categorical_helpers_by_hand() -> None:
    loglik = torch.tensor([-1.0, -2.0, -0.5, -3.0, -3.0])
    rows = torch.tensor([0, 0, 0, 1, 1])
    table = choice_table(loglik, rows, 2)
    assert table[1, 2] == float("-inf")
    logp = categorical_logprobs(loglik, rows, 2)
    expected = torch.softmax(torch.tensor([-1.0, -2.0, -0.5]), 0)
    assert logp[0].exp().tolist() == pytest.approx(expected.tolist())
    assert logp[1, :2].exp().tolist() == pytest.approx([0.5, 0.5])
    assert categorical_entropy(logp)[1].item() == pytest.approx(torch.log(torch.tensor(2.0)).item())
    p, q = expected, torch.tensor([0.2, 0.3, 0.5])
    reference = torch.full_like(logp, float("-inf"))
    reference[0] = q.log()
    reference[1, :2] = torch.tensor([0.5, 0.5]).log()
    kl = categorical_kl(logp, reference)
    assert kl[0].item() == pytest.approx(float((p * (p / q).log()).sum()), abs=1e-6)
    assert kl[1].item() == pytest.approx(0.0, abs=1e-7)
