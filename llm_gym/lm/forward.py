"""The forward passes everything else is built on: the shared-prefix KV cache and one packed forward that returns
the log-probability of every continuation token, the hidden state of each row's last prompt token and the
entropies of the predicting positions.

Works for any Hugging Face causal LM whose decoder accepts a KV cache (under the name the installed transformers
uses, :mod:`llm_gym.lm.cache_arg`), a 4-D ``attention_mask`` and ``position_ids`` (Llama, Qwen2, Mistral, Gemma,
Phi-3, SmolLM ...), wrapped by peft or not. Gradients flow
through everything, the prefix included, so training uses the same code as acting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch
from transformers import DynamicCache

from llm_gym.lm.cache_arg import output_cache, with_cache
from llm_gym.lm.packing import PackedBatch


def causal_lm_of(model: Any) -> Any:
    """The transformers ``*ForCausalLM`` inside ``model`` (a peft wrapper is looked through)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def decoder_and_head(model: Any) -> tuple[Any, torch.nn.Module]:
    """The decoder stack (hidden states after the final norm) and the LM head of ``model``."""
    lm = causal_lm_of(model)
    return lm.get_decoder(), lm.get_output_embeddings()


@dataclass
class PrefixCache:
    """Per-layer keys and values of the shared prompt prefix, for batch size 1."""

    ids: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def length(self) -> int:
        return len(self.ids)

    def expand(self, batch: int) -> Any:
        """A fresh ``DynamicCache`` holding this prefix for ``batch`` rows (views: nothing is copied here, and the
        forward pass that appends to it never touches these tensors)."""
        return DynamicCache(
            ddp_cache_data=[(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in self.layers]
        )


def compute_prefix(model: Any, ids: list[int] | tuple[int, ...]) -> PrefixCache | None:
    """Run the prefix once; ``None`` for an empty prefix. Call under ``torch.no_grad()`` unless training through it."""
    if not ids:
        return None
    decoder, _ = decoder_and_head(model)
    device = next(decoder.parameters()).device
    out = decoder(input_ids=torch.tensor([list(ids)], device=device), use_cache=True)
    layers = [(k, v) for k, v, *_ in output_cache(out)]
    return PrefixCache(tuple(ids), layers)


@dataclass
class PackedOutput:
    """What :func:`packed_forward` computed."""

    token_logprobs: torch.Tensor
    """(T,) log p(continuation token | everything before it), float32."""
    seq_logprobs: torch.Tensor
    """(S,) sum over each continuation's tokens."""
    last_hidden: torch.Tensor
    """(B, H) hidden state of each row's last prompt token (after the final norm)."""
    predictor_logprobs: torch.Tensor = field(repr=False)
    """(U, V) the full next-token log-distribution at each predicting position."""
    seq_offset: torch.Tensor | None = None
    """(S,) a state-dependent offset to each continuation's log-likelihood that a policy computed from this pass
    (an action head on ``last_hidden``); None: none. Added where the policy's choices are scored."""

    @cached_property
    def predictor_entropy(self) -> torch.Tensor:
        """(U,) entropy of the full next-token distribution at each predicting position. Computed when first read:
        only generate mode's loss reads it, and over a 49k-token vocabulary it costs about a fifth of the LM head."""
        return -(self.predictor_logprobs.exp() * self.predictor_logprobs).sum(-1)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, Q, K) bool -> (B, 1, Q, K) additive float mask (0 where allowed), usable by eager and sdpa attention."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[:, None]


def packed_forward(model: Any, batch: PackedBatch, prefix: PrefixCache | None) -> PackedOutput:
    """One forward pass over a :class:`PackedBatch` (see :mod:`llm_gym.lm.packing`)."""
    decoder, head = decoder_and_head(model)
    device = head.weight.device
    rows = batch.input_ids.shape[0]
    if (prefix.length if prefix else 0) != batch.prefix_length:
        raise ValueError("the batch was packed for a different prefix length than the cache holds")
    hidden = decoder(
        input_ids=batch.input_ids.to(device),
        position_ids=batch.position_ids.to(device),
        attention_mask=additive_mask(batch.allowed.to(device), head.weight.dtype),
        use_cache=prefix is not None,
        **with_cache(prefix.expand(rows) if prefix else None),
    ).last_hidden_state
    return continuation_logprobs(hidden, batch, head)


def continuation_logprobs(hidden: torch.Tensor, batch: PackedBatch, head: torch.nn.Module) -> PackedOutput:
    """Log-probs of the packed continuations from the final (normed) hidden states ``(B, Q, H)``."""
    device = hidden.device
    rows = hidden.shape[0]
    last_hidden = hidden[torch.arange(rows, device=device), batch.last_prompt.to(device)]
    predicting = hidden[batch.predict_row.to(device), batch.predict_slot.to(device)]
    logprobs = torch.log_softmax(head(predicting).float(), dim=-1)  # (U, V): only where a token is predicted
    token_logprobs = logprobs[batch.target_predictor.to(device), batch.target_ids.to(device)]
    seq_logprobs = torch.zeros(len(batch.seq_row), dtype=token_logprobs.dtype, device=device)
    seq_logprobs = seq_logprobs.index_add(0, batch.target_seq.to(device), token_logprobs)
    return PackedOutput(token_logprobs, seq_logprobs, last_hidden, logprobs)
