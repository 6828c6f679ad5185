"""Batched sampling: greedy answers equal transformers' own ``generate`` on each prompt alone, the recorded log-probs
are the model's, and rows stop at stop tokens independently."""

from __future__ import annotations

import pytest
import torch

from llm_gym.lm.forward import compute_prefix
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.prompts import EncodedPrompt, PromptBuilder

OBSERVATIONS = ["a short one", "a somewhat longer observation, with more text in it", "mid length text"]


@torch.no_grad()
def test_greedy_batch_equals_hf_generate_per_prompt(tiny_lm) -> None:
    model, tokenizer = tiny_lm
    builder = PromptBuilder(tokenizer, "Rules of the game.")
    prompts = builder.encode(OBSERVATIONS)
    stop = stop_token_ids(tokenizer, model)
    prefix = compute_prefix(model, builder.prefix_ids)
    cached = generate(
        model, prompts, prefix, max_new_tokens=8, stop_ids=stop, pad_id=tokenizer.pad_token_id, temperature=0
    )
    plain = generate(
        model,
        [EncodedPrompt(p.ids, False) for p in prompts],
        None,
        max_new_tokens=8,
        stop_ids=stop,
        pad_id=tokenizer.pad_token_id,
        temperature=0,
    )
    distinct = set()
    for prompt, a, b in zip(prompts, cached, plain, strict=True):
        reference = model.generate(
            torch.tensor([prompt.ids]),
            attention_mask=torch.ones(1, len(prompt.ids), dtype=torch.long),
            max_new_tokens=8,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            eos_token_id=sorted(stop),
            pad_token_id=tokenizer.pad_token_id,
        )
        tokens = reference.sequences[0, len(prompt.ids) :].tolist()
        logprobs = [
            float(torch.log_softmax(s[0].float(), -1)[t]) for s, t in zip(reference.scores, tokens, strict=False)
        ]
        assert a.tokens == b.tokens == tokens
        assert a.logprobs == pytest.approx(logprobs, abs=1e-4)
        distinct.add(tuple(tokens))
    assert len(distinct) > 1, "the random model should answer different prompts differently"


@torch.no_grad()
def test_sampling_is_seeded_and_stops_at_stop_tokens(tiny_lm) -> None:
    model, tokenizer = tiny_lm
    builder = PromptBuilder(tokenizer, "Rules.")
    prompts = builder.encode(OBSERVATIONS * 3)
    prefix = compute_prefix(model, builder.prefix_ids)
    # Every character but "x" stops: answers end after their first token unless it is "x".
    stop = set(range(len(tokenizer))) - {tokenizer.convert_tokens_to_ids("x")}
    runs = [
        generate(
            model,
            prompts,
            prefix,
            max_new_tokens=5,
            stop_ids=stop,
            pad_id=tokenizer.pad_token_id,
            temperature=1.0,
            generator=torch.Generator().manual_seed(3),
        )
        for _ in range(2)
    ]
    assert [g.tokens for g in runs[0]] == [g.tokens for g in runs[1]]
    x = tokenizer.convert_tokens_to_ids("x")
    for g in runs[0]:
        assert len(g.logprobs) == len(g.tokens) and all(lp <= 0 for lp in g.logprobs)
        assert all(t == x for t in g.tokens[:-1])  # every token before the last one was a non-stop token
        assert g.stopped == (g.tokens[-1] != x) and (g.stopped or len(g.tokens) == 5)
