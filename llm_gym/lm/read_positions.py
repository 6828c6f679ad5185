"""The last decoder layer at the positions whose output is read, and nowhere else.

A packed forward (:mod:`llm_gym.lm.packing`) reads the top of the model at few of its slots: the positions that
predict a continuation token and each row's last prompt token, about one slot in ten for a board-game prompt. Every
layer below the last must run at every slot (the layer above attends to all of them), but the last layer's output is
read only there. So the last layer gets the keys and values of every slot (its input norm and its key and value
projections, the cheap part) and runs its queries, attention output and MLP at the read slots only: the same numbers
as the whole layer up to rounding, at about a sixth of its cost.

The layer itself is called (its attention implementation, biases, LoRA and grouped heads all apply): with the keys
and values of every slot already in its cache, on a batch of the read slots only, whose own keys (appended by the
layer after the rest) are masked out. It needs a Llama-style layer whose keys are ``k_proj`` of ``input_layernorm``
then the rotary embedding (Llama, SmolLM, Qwen2, Mistral); :func:`reads_fewer_positions` says when a layer is one,
and the caller runs the whole layer otherwise.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import torch

from llm_gym.lm.cache_arg import with_cache
from llm_gym.lm.packing import PackedBatch

_LAYER_PARTS = {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}
_ATTENTION_PARTS = {"q_proj", "k_proj", "v_proj", "o_proj"}


def reads_fewer_positions(layer: Any) -> bool:
    """Whether ``layer`` has the Llama shape this module relies on (no other norm, no query or key norm, no fused
    projections: any of those would be skipped here, so such layers run whole)."""
    attention = getattr(layer, "self_attn", None)
    rotary = sys.modules[type(attention).__module__].__dict__.get("apply_rotary_pos_emb") if attention else None
    return (
        {name for name, _ in layer.named_children()} == _LAYER_PARTS
        and {name for name, _ in attention.named_children()} == _ATTENTION_PARTS
        and callable(rotary)
        and hasattr(attention, "head_dim")
    )


@dataclass
class ReadSlots:
    """Which slots of a packed batch are read, and the batch re-indexed to them."""

    slots: torch.Tensor
    """(B, R) the read slots of each row, in order; a row with fewer repeats its last (its copies are never read)."""
    batch: PackedBatch
    """The batch with ``predict_slot`` and ``last_prompt`` pointing into the R read slots."""


def read_slots(batch: PackedBatch) -> ReadSlots:
    """The slots whose last-layer output :func:`llm_gym.lm.forward.continuation_logprobs` reads."""
    rows = batch.input_ids.shape[0]
    per_row: list[list[int]] = [[int(slot)] for slot in batch.last_prompt]
    for row, slot in zip(batch.predict_row.tolist(), batch.predict_slot.tolist(), strict=True):
        per_row[row].append(slot)
    per_row = [sorted(set(slots)) for slots in per_row]
    width = max(len(slots) for slots in per_row)
    slots = torch.tensor([s + [s[-1]] * (width - len(s)) for s in per_row], dtype=torch.long)
    where = [{slot: i for i, slot in enumerate(s)} for s in per_row]
    predict = [where[r][s] for r, s in zip(batch.predict_row.tolist(), batch.predict_slot.tolist(), strict=True)]
    last = [where[r][int(batch.last_prompt[r])] for r in range(rows)]
    remapped = replace(batch, predict_slot=torch.tensor(predict, dtype=torch.long),
                       last_prompt=torch.tensor(last, dtype=torch.long))  # fmt: skip
    return ReadSlots(slots, remapped)


def last_layer_at(
    layer: Any,
    hidden: torch.Tensor,
    read: torch.Tensor,
    position_ids: torch.Tensor,
    mask: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    cache: Any,
    layer_index: int,
) -> torch.Tensor:
    """``layer``'s output (B, R, H) at the ``read`` slots (B, R) of ``hidden`` (B, Q, H), the whole layer's keys
    and values attended to: those of ``cache`` (the prefix, if any) then every slot's. ``mask`` is the layer's
    additive mask (B, 1, Q, K) for all slots; ``position_embeddings`` the rotary (cos, sin) (B, Q, D)."""
    attention = layer.self_attn
    rotate = sys.modules[type(attention).__module__].apply_rotary_pos_emb
    rows, width, _ = hidden.shape
    cos, sin = position_embeddings
    normed = layer.input_layernorm(hidden)
    shape = (rows, width, -1, attention.head_dim)
    keys = attention.k_proj(normed).view(shape).transpose(1, 2)
    values = attention.v_proj(normed).view(shape).transpose(1, 2)
    keys, _ = rotate(keys, keys, cos, sin)
    cache.update(keys, values, layer_index)
    take = read[:, :, None]
    hidden_read = hidden.gather(1, take.expand(-1, -1, hidden.shape[2]))
    cos_read = cos.gather(1, take.expand(-1, -1, cos.shape[2]))
    sin_read = sin.gather(1, take.expand(-1, -1, sin.shape[2]))
    mask_read = mask.gather(2, read[:, None, :, None].expand(-1, 1, -1, mask.shape[3]))
    # The layer appends the read slots' own keys after everyone's: masked, they are not counted twice.
    masked = torch.full((*mask_read.shape[:3], read.shape[1]), torch.finfo(mask.dtype).min, dtype=mask.dtype,
                        device=mask.device)  # fmt: skip
    out = layer(
        hidden_read,
        attention_mask=torch.cat([mask_read, masked], dim=3),
        position_ids=position_ids.gather(1, read),
        use_cache=True,
        **with_cache(cache),
        position_embeddings=(cos_read, sin_read),
    )
    return out[0] if isinstance(out, tuple) else out
