"""Batched sampling for ``generate`` mode: many prompts at once, the shared prefix from its KV cache, one token per
row per step, each sampled token's log-probability recorded.

Rows are right-padded; a 4-D mask and per-row position ids keep every row exactly as if it ran alone (the padding
between a short prompt and its first sampled token is masked out). A row stops at a stop token or after
``max_new_tokens``; the batch stops when every row has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from llm_gym.lm.cache_arg import output_cache, with_cache
from llm_gym.lm.forward import PrefixCache, additive_mask, decoder_and_head
from llm_gym.lm.prompts import EncodedPrompt


@dataclass
class Generation:
    """One sampled completion."""

    tokens: list[int]
    """Sampled token ids, the stop token included when one was sampled."""
    logprobs: list[float]
    """log p of each sampled token under the (temperature-scaled) sampling distribution."""
    stopped: bool
    """True when a stop token ended it (False: cut at ``max_new_tokens``)."""


def stop_token_ids(tokenizer: Any, model: Any = None) -> set[int]:
    """The tokens that end an answer: the tokenizer's EOS, the model's generation-config EOS ids and the usual
    chat end-of-turn markers the vocabulary has."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    config = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if config is not None:
        ids.update([config] if isinstance(config, int) else config)
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>") if t in vocab)
    return ids


@torch.no_grad()
def generate(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    prefix: PrefixCache | None,
    *,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[Generation]:
    """Sample a completion for every prompt (``temperature=0``: greedy)."""
    decoder, head = decoder_and_head(model)
    device, dtype = head.weight.device, head.weight.dtype
    rows = len(prompts)
    skip = prefix.length if prefix else 0
    suffixes = [p.ids[skip:] if p.uses_prefix else p.ids for p in prompts]
    width = max(len(s) for s in suffixes)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    positions = torch.zeros((rows, width), dtype=torch.long)
    valid = torch.zeros((rows, skip + width), dtype=torch.bool)  # which keys each row may see
    lengths = torch.tensor([len(s) for s in suffixes])
    for b, (suffix, prompt) in enumerate(zip(suffixes, prompts, strict=True)):
        start = skip if prompt.uses_prefix else 0
        input_ids[b, : len(suffix)] = torch.tensor(suffix)
        positions[b, : len(suffix)] = torch.arange(start, start + len(suffix))
        positions[b, len(suffix) :] = start + len(suffix) - 1
        valid[b, skip : skip + len(suffix)] = True
        if prompt.uses_prefix:
            valid[b, :skip] = True
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    allowed = valid[:, None, :].repeat(1, width, 1)
    allowed[:, :, skip:] &= causal
    allowed[:, :, skip:] |= torch.eye(width, dtype=torch.bool)  # padding queries see themselves: no empty rows
    cache = prefix.expand(rows) if prefix else None
    out = decoder(
        input_ids=input_ids.to(device),
        position_ids=positions.to(device),
        attention_mask=additive_mask(allowed.to(device), dtype),
        use_cache=True,
        **with_cache(cache),
    )
    cache = output_cache(out)
    hidden = out.last_hidden_state[torch.arange(rows), lengths - 1]
    next_position = positions[torch.arange(rows), lengths - 1] + 1

    tokens: list[list[int]] = [[] for _ in range(rows)]
    logprobs: list[list[float]] = [[] for _ in range(rows)]
    done = torch.zeros(rows, dtype=torch.bool)
    stopped = torch.zeros(rows, dtype=torch.bool)
    stop = torch.tensor(sorted(stop_ids), dtype=torch.long)
    for step in range(max_new_tokens):
        logits = head(hidden).float()
        chosen, chosen_logprob = _sample(logits, temperature, generator)
        for b in torch.nonzero(~done).flatten().tolist():
            tokens[b].append(int(chosen[b]))
            logprobs[b].append(float(chosen_logprob[b]))
        newly_stopped = torch.isin(chosen.cpu(), stop) & ~done
        stopped |= newly_stopped
        done |= newly_stopped
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        valid = torch.cat([valid, torch.ones((rows, 1), dtype=torch.bool)], dim=1)
        out = decoder(
            input_ids=chosen[:, None].to(device),
            position_ids=next_position[:, None].to(device),
            attention_mask=additive_mask(valid[:, None, :].to(device), dtype),
            use_cache=True,
            **with_cache(cache),
        )
        cache = output_cache(out)
        hidden = out.last_hidden_state[:, -1]
        next_position += 1
    return [Generation(t, lp, bool(s)) for t, lp, s in zip(tokens, logprobs, stopped.tolist(), strict=True)]


def _sample(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    # On the CPU, where the (CPU) generator lives: a batch of next-token distributions is small.
    logits = logits.float().cpu()
    if temperature <= 0:
        logprobs = torch.log_softmax(logits, dim=-1)
        chosen = logits.argmax(dim=-1)
    else:
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        chosen = torch.multinomial(logprobs.exp(), 1, generator=generator).squeeze(1)
    return chosen, logprobs.gather(1, chosen[:, None]).squeeze(1)
