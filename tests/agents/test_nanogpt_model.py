"""The nanoGPT actor-critic: causal masking, the query-only last block, shapes, masks, positions, tokenizer, FLOPs."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from llm_gym.agents.nanogpt_ppo.model import (
    NanoGPTActorCritic,
    distribution_terms,
    forward_flops,
    line_and_column,
)
from llm_gym.agents.nanogpt_ppo.testing import tiny_network
from llm_gym.agents.nanogpt_ppo.tokenizer import PAD, QUERY, UNK, CharTokenizer
from llm_gym.envs.spaces import TEXT_CHARSET

TOKENIZER = CharTokenizer()
NEWLINE = int(TOKENIZER.encode("\n")[0])


def tiny(
    positions: str = "line_column", n_layer: int = 2, context: int = 48, n_actions: int = 4, query_summary: bool = True
) -> NanoGPTActorCritic:
    return tiny_network(
        positions=positions, n_layer=n_layer, context=context, n_actions=n_actions, query_summary=query_summary
    )


def grid_tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, TOKENIZER.vocab_size, (batch, length), generator=generator)
    tokens[:, 7::8] = NEWLINE
    tokens[:, 11::13] = QUERY  # query tokens mid-sequence: their prefix summary must stay causal too
    return tokens


@pytest.mark.parametrize("query_summary", [False, True])
@pytest.mark.parametrize("positions", ["absolute", "line_column"])
def test_a_later_token_never_changes_an_earlier_position(positions: str, query_summary: bool) -> None:
    model = tiny(positions, query_summary=query_summary)
    tokens = grid_tokens(2, 40)
    before = model.hidden(tokens)
    for changed in (5, 17, 39):
        edited = tokens.clone()
        # A newline at the edit shifts the line/column of every *later* token, the strongest edit there is.
        edited[:, changed] = NEWLINE if tokens[0, changed] != NEWLINE else 3
        after = model.hidden(edited)
        assert torch.equal(after[:, :changed], before[:, :changed]), f"positions before {changed} moved"
        assert not torch.allclose(after[:, changed], before[:, changed]), "the edited position itself must change"


@pytest.mark.parametrize("n_layer", [1, 2, 3])
def test_query_only_last_block_equals_running_it_on_every_position(n_layer: int) -> None:
    model = tiny(n_layer=n_layer)
    tokens = grid_tokens(3, 40, seed=1)
    query = torch.tensor([39, 20, 4])  # rows 1 and 2 are right-padded: their keys must stop at the query
    feats = model.features(tokens, query)
    for row in range(3):
        alone = model.hidden(tokens[row : row + 1, : query[row] + 1])[0, query[row]]
        torch.testing.assert_close(feats[row], alone, rtol=0, atol=1e-12)


def test_heads_have_the_documented_shapes_and_masks_zero_illegal_actions() -> None:
    model = tiny(n_actions=5).float()
    tokens = grid_tokens(6, 30)
    query = torch.full((6,), 29)
    logits, values = model(tokens, query)
    assert logits.shape == (6, 5) and values.shape == (6,)
    assert model.hidden(tokens).shape == (6, 30, 16)
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[:, [1, 3]] = False
    masked, _ = model(tokens, query, mask)
    probs = torch.softmax(masked, -1)
    assert torch.all(probs[:, [1, 3]] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(6))
    logprob, entropy = distribution_terms(masked, torch.zeros(6, dtype=torch.long))
    assert torch.isfinite(entropy).all() and torch.isfinite(logprob).all()
    # the entropy of the masked distribution is that of the 3 legal actions alone
    legal = torch.softmax(logits[:, [0, 2, 4]], -1)
    torch.testing.assert_close(entropy, -(legal * legal.log()).sum(-1))


def test_query_summary_gives_the_query_input_a_single_character_elsewhere() -> None:
    # Two observations that differ in one character (where a ball is): without the summary the query token's input
    # is the same for both (only attention can tell them apart, and at initialisation it averages over everything);
    # with it the input differs, so the features depend on the observation from the first step.
    tokens = torch.full((2, 40), int(TOKENIZER.encode(" ")[0]))
    tokens[:, 7::8] = NEWLINE
    tokens[0, 12], tokens[1, 30] = int(TOKENIZER.encode("o")[0]), int(TOKENIZER.encode("o")[0])
    tokens[:, 39] = QUERY
    without, with_summary = (tiny(query_summary=s)._embed(tokens)[:, 39] for s in (False, True))
    assert torch.equal(without[0], without[1])
    assert not torch.allclose(with_summary[0], with_summary[1])


def test_query_summary_fast_path_equals_the_running_max() -> None:
    model = tiny()
    tokens = grid_tokens(3, 30, seed=2)
    tokens[tokens == QUERY] = 5
    tokens[:, 29], tokens[1, 0] = QUERY, QUERY  # row 1: a query with nothing before it gets no summary
    x = torch.randn(3, 30, 16, requires_grad=True)
    fast = model._query_summary(tokens[[0, 2]], x[[0, 2]])
    tokens_twice = torch.cat([tokens, tokens[:, :1]], 1)  # two queries in row 1: forces the running max
    slow = model._query_summary(tokens_twice, torch.cat([x, x[:, :1]], 1))[:, :30]
    assert torch.equal(fast, slow[[0, 2]])
    assert torch.equal(model._query_summary(tokens[1:2], x[1:2])[0, 0], torch.zeros(16))


def test_a_first_policy_is_close_to_uniform() -> None:
    logits, _ = tiny(n_actions=4)(grid_tokens(4, 30), torch.full((4,), 29))
    probs = torch.softmax(logits, -1)
    assert torch.all((probs - 0.25).abs() < 0.02)


def test_too_long_an_input_raises() -> None:
    with pytest.raises(ValueError, match="exceed the model's context"):
        tiny(context=16).hidden(grid_tokens(1, 17))


def test_line_and_column_are_counted_from_newlines() -> None:
    tokens = torch.from_numpy(TOKENIZER.encode("ab\ncde\n\nf")).long()[None]
    line, column = line_and_column(tokens, NEWLINE)
    assert line[0].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 3]
    assert column[0].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 0]


def test_tokenizer_covers_the_charset_and_places_the_query_token() -> None:
    assert TOKENIZER.vocab_size == 3 + len(TEXT_CHARSET)
    text = "score 3\n|  o  |\n|===  |"
    assert TOKENIZER.decode(TOKENIZER.encode(text)) == text
    assert TOKENIZER.encode("\x01")[0] == UNK
    tokens, query = TOKENIZER.encode_batch(["abc", "a", "abcdefghij"], context=6)
    assert query.tolist() == [3, 1, 5]
    assert tokens[0].tolist()[3:] == [QUERY, PAD, PAD]
    assert tokens[1, 2:].tolist() == [PAD] * 4
    # Too long: the end of the text is kept (it says what is happening now).
    assert TOKENIZER.decode(tokens[2, :5]) == "fghij" and tokens[2, 5] == QUERY


@pytest.mark.parametrize("n_layer", [1, 3])
def test_flop_estimate_matches_torch_flop_counter(n_layer: int) -> None:
    model = tiny(n_layer=n_layer, context=64).float()
    tokens, query = grid_tokens(1, 64), torch.tensor([63])
    with FlopCounterMode(display=False) as counter:
        model(tokens, query)
    # torch's counter sees the matmuls (its CPU flash-attention kernel is not registered), so the dense part must
    # match exactly; attention is what the estimate adds on top: causal full blocks + one query in the last.
    t, d = 64, model.shape.n_embd
    attention = (n_layer - 1) * t * 2 * 2 * d * (t + 1) / 2 + 2 * 2 * d * t
    assert forward_flops(model.shape, t) - attention == pytest.approx(counter.get_total_flops(), rel=1e-6)
