"""``key_frequency_bias``: the keys' log-counts, causality and the query-only last block with it, what attention
starts from, and that the per-head scale learns."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llm_gym.agents.nanogpt_ppo.model import CausalSelfAttention, GPTShape, NanoGPTActorCritic, key_log_counts
from llm_gym.agents.nanogpt_ppo.testing import tiny_network
from llm_gym.agents.nanogpt_ppo.tokenizer import QUERY, CharTokenizer

TOKENIZER = CharTokenizer()
NEWLINE = int(TOKENIZER.encode("\n")[0])


def tiny(n_layer: int = 2) -> NanoGPTActorCritic:
    return tiny_network(n_layer=n_layer, key_frequency_bias=True)


def grid_tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    """Few kinds of character (so counts differ a lot), newlines, and query tokens mid-sequence."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, 8, (batch, length), generator=generator)
    tokens[:, 7::8] = NEWLINE
    tokens[:, 11::13] = QUERY
    return tokens


def test_log_counts_are_the_counts_a_query_can_see() -> None:
    tokens = grid_tokens(2, 30)
    query = torch.tensor([29, 12])
    at_query = key_log_counts(tokens, TOKENIZER.vocab_size, query)
    every = key_log_counts(tokens, TOKENIZER.vocab_size)
    for b in range(2):
        for j in range(int(query[b]) + 1):
            seen = tokens[b, : query[b] + 1]
            assert at_query[b, j].exp().round() == (seen == tokens[b, j]).sum()
        for i in range(30):
            for j in range(i + 1):
                assert every[b, i, j].exp().round() == (tokens[b, : i + 1] == tokens[b, j]).sum()


@pytest.mark.parametrize("n_layer", [1, 2])
def test_a_later_token_never_changes_an_earlier_position(n_layer: int) -> None:
    model = tiny(n_layer)
    tokens = grid_tokens(2, 40)
    before = model.hidden(tokens)
    for changed in (5, 17, 39):
        edited = tokens.clone()
        edited[:, changed] = tokens[0, 0]  # one more of an existing kind: every later count of it moves
        after = model.hidden(edited)
        assert torch.equal(after[:, :changed], before[:, :changed]), f"positions before {changed} moved"


@pytest.mark.parametrize("n_layer", [1, 2, 3])
def test_query_only_last_block_equals_running_it_on_every_position(n_layer: int) -> None:
    model = tiny(n_layer)
    tokens = grid_tokens(3, 40, seed=1)
    query = torch.tensor([39, 20, 4])  # right-padded rows: their counts and keys must stop at the query
    feats = model.features(tokens, query)
    for row in range(3):
        alone = model.hidden(tokens[row : row + 1, : query[row] + 1])[0, query[row]]
        torch.testing.assert_close(feats[row], alone, rtol=0, atol=1e-12)


def test_attention_starts_even_over_the_kinds_of_character() -> None:
    # With query and key projections at zero only the bias scores the keys: at scale 1 each kind of character gets
    # the same total weight however many of it there are, so the output is the mean over kinds of each kind's mean.
    one_head = dataclasses.replace(tiny_network(key_frequency_bias=True).shape, n_embd=4, n_head=1)
    attention = CausalSelfAttention(one_head).double()
    with torch.no_grad():
        attention.c_attn.weight.zero_()
        attention.c_attn.bias.zero_()
        attention.c_attn.weight[8:] = torch.eye(4)  # values are the inputs
        attention.c_proj.weight.copy_(torch.eye(4))
        attention.c_proj.bias.zero_()
    tokens = torch.tensor([[5, 5, 5, 5, 5, 5, 6, 7, 7, 5]])  # 7 blanks, one ball, two paddle characters
    x = torch.randn(1, 10, 4, dtype=torch.float64)
    query = torch.tensor([9])
    out = attention.read_out(x, x[:, 9], query, key_log_counts(tokens, TOKENIZER.vocab_size, query))
    kinds = [x[0, tokens[0] == kind].mean(0) for kind in (5, 6, 7)]
    torch.testing.assert_close(out[0], torch.stack(kinds).mean(0))
    plain = CausalSelfAttention(one_head).double()
    plain.load_state_dict(attention.state_dict())
    with torch.no_grad():
        plain.frequency_scale.zero_()  # scale 0: plain attention, the mean over positions
    out = plain.read_out(x, x[:, 9], query, key_log_counts(tokens, TOKENIZER.vocab_size, query))
    torch.testing.assert_close(out[0], x[0].mean(0))


def test_the_scale_of_every_head_is_learnt() -> None:
    model = tiny(n_layer=2)
    tokens = grid_tokens(4, 30)
    logits, values = model(tokens, torch.full((4,), 29))
    (logits.square().sum() + values.square().sum()).backward()
    for block in model.blocks:
        assert block.attn.frequency_scale is not None
        assert block.attn.frequency_scale.shape == (2,) and torch.all(block.attn.frequency_scale.grad != 0)


def test_networks_saved_before_the_option_load_without_it() -> None:
    fields = {k: v for k, v in tiny_network().shape.__dict__.items() if k != "key_frequency_bias"}
    assert GPTShape(**fields).key_frequency_bias is False
    assert not any("frequency_scale" in name for name in NanoGPTActorCritic(GPTShape(**fields)).state_dict())
