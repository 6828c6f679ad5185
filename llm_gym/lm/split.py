"""A causal LM cut in two at decoder layer ``split``, for training on a CPU.

LoRA goes on the layers from ``split`` up only. The layers below never change, so a rollout runs them once per
decision and keeps their output (the hidden states entering layer ``split``); every PPO epoch and the reference
policy then run only the top layers on those stored states. With 8 of SmolLM2's 30 layers trainable an update
costs about a quarter of a full forward and backward pass, and the result is the same as running the whole model
(tests/lm/test_split.py checks it against :func:`llm_gym.lm.forward.packed_forward`).

Needs a Llama-style decoder (``layers``, ``norm``, ``rotary_emb``; the layer takes ``position_embeddings``),
which covers Llama, SmolLM, Qwen2, Mistral and Phi-3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from llm_gym.errors import ConfigError
from llm_gym.lm.adapter_compute import AdapterCompute, AdapterComputeMode
from llm_gym.lm.cache_arg import cache_arg, with_cache
from llm_gym.lm.forward import PackedOutput, additive_mask, continuation_logprobs, decoder_and_head
from llm_gym.lm.packing import PackedBatch
from llm_gym.lm.read_positions import last_layer_at, read_slots, reads_fewer_positions


class UnsupportedModelError(ConfigError):
    """A model whose decoder cannot be split (not Llama-style)."""


class _Stop(Exception):
    """Raised by the hook at the split layer: nothing above it needs computing."""


@dataclass
class BottomPrefix:
    """The shared prefix below the split: its KV cache for the frozen layers and its hidden states at the split."""

    ids: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    hidden: torch.Tensor
    """(1, P, H) hidden states entering layer ``split``."""

    @property
    def length(self) -> int:
        return len(self.ids)


@dataclass
class TopPrefix:
    """The prefix's keys and values in the trainable layers, for the current adapter (gradients attached when
    computed with grad enabled)."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    length: int


class SplitLM:
    """Runs ``model`` (peft-wrapped or not) as frozen layers ``[0, split)`` and trainable layers ``[split, L)``; the
    trainable layers' LoRA products in the base dtype unless ``adapter_compute`` is float32
    (:mod:`llm_gym.lm.adapter_compute`)."""

    def __init__(self, model: Any, split: int, adapter_compute: AdapterComputeMode = "auto") -> None:
        self.model = model
        self.decoder, self.head = decoder_and_head(model)
        missing = [name for name in ("layers", "norm", "rotary_emb") if not hasattr(self.decoder, name)]
        if missing:
            raise UnsupportedModelError(
                f"{type(self.decoder).__name__} has no {', '.join(missing)}, so it cannot be split for training; "
                "use a Llama-style model (Llama, SmolLM, Qwen2, Mistral, Phi-3)"
            )
        self.num_layers = len(self.decoder.layers)
        if not 0 <= split < self.num_layers:
            raise ValueError(f"split must be in [0, {self.num_layers}), got {split}")
        self.split = split
        # The last layer at the read slots only (llm_gym/lm/read_positions.py) where its shape allows it.
        self.reads_fewer = reads_fewer_positions(self.decoder.layers[-1])
        self.adapter_compute = AdapterCompute(model, self.dtype, self.device, adapter_compute)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.head.weight.dtype

    # -- below the split (frozen) ------------------------------------------------------------------------------

    def _run_bottom(self, **decoder_kwargs: Any) -> tuple[torch.Tensor, Any]:
        captured: dict[str, Any] = {}

        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            captured["hidden"] = args[0] if args else kwargs["hidden_states"]
            raise _Stop

        handle = self.decoder.layers[self.split].register_forward_pre_hook(hook, with_kwargs=True)
        cache = decoder_kwargs.setdefault(cache_arg(), None)
        if cache is None:
            cache = decoder_kwargs[cache_arg()] = DynamicCache()
        try:
            self.decoder(use_cache=True, **decoder_kwargs)
        except _Stop:
            pass
        finally:
            handle.remove()
        return captured["hidden"], cache

    @torch.no_grad()
    def bottom_prefix(self, ids: list[int] | tuple[int, ...]) -> BottomPrefix | None:
        """Run the prefix through the frozen layers (once per run: they never change)."""
        if not ids:
            return None
        hidden, cache = self._run_bottom(input_ids=torch.tensor([list(ids)], device=self.device))
        layers = [(layer.keys, layer.values) for layer in cache.layers[: self.split]]
        return BottomPrefix(tuple(ids), layers, hidden)

    @torch.no_grad()
    def bottom(self, batch: PackedBatch, prefix: BottomPrefix | None) -> torch.Tensor:
        """(B, Q, H) hidden states entering layer ``split`` for a packed batch."""
        rows = batch.input_ids.shape[0]
        self._check_prefix(batch, prefix)
        cache = None
        if prefix is not None:
            cache = DynamicCache(
                ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in prefix.layers]
            )
        hidden, _ = self._run_bottom(
            input_ids=batch.input_ids.to(self.device),
            position_ids=batch.position_ids.to(self.device),
            attention_mask=additive_mask(batch.allowed.to(self.device), self.dtype),
            **with_cache(cache),
        )
        return hidden

    # -- from the split up (trainable) -------------------------------------------------------------------------

    def _run_top(
        self, hidden: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor, cache: Any,
        read: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """The trainable layers' output at every slot, or with ``read`` (B, R) at those slots only."""
        position_embeddings = self.decoder.rotary_emb(hidden, position_ids=position_ids)
        layers = self.decoder.layers[self.split :]
        if read is not None:
            layers = layers[:-1]
        with self.adapter_compute():
            for layer in layers:
                out = layer(
                    hidden,
                    attention_mask=mask,
                    position_ids=position_ids,
                    use_cache=True,
                    **with_cache(cache),
                    position_embeddings=position_embeddings,
                )
                hidden = out[0] if isinstance(out, tuple) else out
            if read is not None:
                hidden = last_layer_at(self.decoder.layers[-1], hidden, read, position_ids, mask,
                                       position_embeddings, cache, self.num_layers - 1)  # fmt: skip
        return hidden

    def top_prefix(self, prefix: BottomPrefix | None) -> TopPrefix | None:
        """The prefix through the trainable layers with the current adapter (recompute after every update)."""
        if prefix is None:
            return None

        length = prefix.length
        causal = torch.ones((1, length, length), dtype=torch.bool, device=self.device).tril()
        cache = DynamicCache()
        positions = torch.arange(length, device=self.device)[None]
        self._run_top(prefix.hidden, positions, additive_mask(causal, self.dtype), cache)
        layers = [(layer.keys, layer.values) for layer in cache.layers[self.split :]]
        return TopPrefix(layers, length)

    def top(self, hidden: torch.Tensor, batch: PackedBatch, prefix: TopPrefix | None) -> PackedOutput:
        """Continuation log-probs (and the last prompt token's hidden state) from the split hidden states."""
        rows = hidden.shape[0]
        self._check_prefix(batch, prefix)
        cache = DynamicCache(
            ddp_cache_data=[(None, None)] * self.split
            + [(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in (prefix.layers if prefix else [])]
        )
        read = read_slots(batch) if self.reads_fewer else None
        out = self._run_top(
            hidden.to(self.dtype),
            batch.position_ids.to(self.device),
            additive_mask(batch.allowed.to(self.device), self.dtype),
            cache,
            read.slots.to(self.device) if read else None,
        )
        return continuation_logprobs(self.decoder.norm(out), read.batch if read else batch, self.head)

    @staticmethod
    def _check_prefix(batch: PackedBatch, prefix: Any) -> None:
        if (prefix.length if prefix is not None else 0) != batch.prefix_length:
            raise ValueError("the batch was packed for a different prefix length than the cache holds")
