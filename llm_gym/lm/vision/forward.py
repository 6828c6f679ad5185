"""An image+text model seen as a causal LM whose decoder merges image features into the prompt on its first call.

The text runtime reaches a model through ``get_decoder()`` (hidden states after the final norm, taking
``input_ids``, ``position_ids``, a 4-D ``attention_mask`` and a KV cache) and ``get_output_embeddings()``
(:func:`llm_gym.lm.forward.decoder_and_head`). :class:`ImageTextLM` gives exactly that for a model whose inner
model embeds ``input_ids``, runs the vision encoder on ``pixel_values`` and puts the image features at the image
tokens (Idefics3/SmolVLM's ``model.model`` does; so do Idefics2 and LLaVA-style models that use 1-D positions).
The images of a batch are handed over with :meth:`ImageTextLM.images` and consumed by the next decoder call only:
the prompt pass. Later calls (sampled tokens, which might even be an image token) see no images. So the packed
scorer and the batched sampler of the text runtime run on a vision model unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from llm_gym.lm.forward import causal_lm_of


class ImageDecoder(nn.Module):
    """The inner model, called with the pending images (if any) on the next call only."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.pending: dict[str, torch.Tensor] | None = None

    def forward(self, input_ids: torch.Tensor, **kwargs: Any) -> Any:
        images, self.pending = self.pending, None
        device = input_ids.device
        extra = {k: v.to(device) for k, v in (images or {}).items()}
        if "pixel_values" in extra:
            extra["pixel_values"] = extra["pixel_values"].to(next(self.inner.parameters()).dtype)
        return self.inner(input_ids=input_ids, **kwargs, **extra)


class ImageTextLM(nn.Module):
    """``model`` (an image+text model, peft-wrapped or not) with the text runtime's causal-LM surface."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        full = causal_lm_of(model)
        inner = getattr(full, "model", None)
        if inner is None or not hasattr(full, "get_output_embeddings"):
            raise TypeError(f"{type(full).__name__} has no inner .model that merges images; not supported")
        self.decoder = ImageDecoder(inner)
        self.head = full.get_output_embeddings()
        self.generation_config = getattr(full, "generation_config", None)

    def get_decoder(self) -> ImageDecoder:
        return self.decoder

    def get_output_embeddings(self) -> nn.Module:
        return self.head

    @contextlib.contextmanager
    def images(self, tensors: dict[str, torch.Tensor]) -> Iterator[None]:
        """Hand ``tensors`` (``pixel_values`` ...) to the next decoder call; dropped on exit if unused."""
        self.decoder.pending = tensors or None
        try:
            yield
        finally:
            self.decoder.pending = None
