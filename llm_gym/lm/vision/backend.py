"""The ``hf-vision`` backend: an image+text chat model (Idefics3/SmolVLM first) in this process.

Score mode packs every observation of a batch with a trie of its legal actions into one forward pass (the text
runtime's :func:`~llm_gym.lm.packing.pack` and :func:`~llm_gym.lm.forward.packed_forward`): the system prompt comes
from its KV cache, each observation's image goes through the vision encoder once, and every action is scored
exactly. Generate mode samples all prompts together (:func:`~llm_gym.lm.generation.generate`). The ``hf`` backend
hands a model over to this one when its config has a ``vision_config``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.forward import PrefixCache, compute_prefix, packed_forward
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.models import DType
from llm_gym.lm.packing import pack
from llm_gym.lm.runtime import configure_threads, default_device
from llm_gym.lm.vision.forward import ImageTextLM
from llm_gym.lm.vision.models import load_vision_lm
from llm_gym.lm.vision.prompts import VisionPromptBuilder, stack_images


class VisionBackend:
    """A Hugging Face image+text model behind the backend interface.

    Args:
        model: a local directory or a locally cached HF id of an image+text model (e.g. SmolVLM).
        dtype, device, threads, batch_size, score_with_end: as for the ``hf`` backend.
        image_splitting: cut large images into tiles (many more image tokens); off by default (one tile).
    """

    name = "hf-vision"

    def __init__(
        self,
        model: str,
        *,
        dtype: DType = "auto",
        device: str | None = None,
        threads: int = 0,
        batch_size: int = 8,
        score_with_end: bool = True,
        image_splitting: bool = False,
    ) -> None:
        configure_threads(threads)
        lm, processor = load_vision_lm(
            model, dtype=dtype, device=device or default_device(), image_splitting=image_splitting
        )
        self._setup(lm, processor, batch_size, score_with_end)

    @classmethod
    def from_model(
        cls, model: Any, processor: Any, *, batch_size: int = 8, score_with_end: bool = True
    ) -> VisionBackend:
        """Wrap an already loaded model (e.g. one being fine-tuned); its weights must not change afterwards."""
        backend = cls.__new__(cls)
        backend._setup(model, processor, batch_size, score_with_end)
        return backend

    def _setup(self, model: Any, processor: Any, batch_size: int, score_with_end: bool) -> None:
        self.model, self.processor, self.tokenizer = model, processor, processor.tokenizer
        self.lm = ImageTextLM(model)
        self.batch_size = max(1, batch_size)
        self.score_with_end = score_with_end
        self.stop_ids = stop_token_ids(self.tokenizer, self.lm)
        self._prompts: dict[str, tuple[VisionPromptBuilder, PrefixCache | None]] = {}
        self._generator = torch.Generator()

    def prompt_builder(self, instructions: str) -> tuple[VisionPromptBuilder, PrefixCache | None]:
        """The builder and the system prompt's KV cache (made on first use)."""
        if instructions not in self._prompts:
            builder = VisionPromptBuilder(self.processor, instructions)
            with torch.inference_mode():
                prefix = compute_prefix(self.lm, builder.prefix_ids)
            self._prompts[instructions] = (builder, prefix)
        return self._prompts[instructions]

    def _chunks(self, requests: Sequence[Any]) -> list[tuple[str, list[int]]]:
        groups: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.instructions, []).append(i)
        return [
            (instructions, indices[start : start + self.batch_size])
            for instructions, indices in groups.items()
            for start in range(0, len(indices), self.batch_size)
        ]

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        results: list[np.ndarray] = [np.empty(0)] * len(requests)
        for instructions, chunk in self._chunks(requests):
            builder, prefix = self.prompt_builder(instructions)
            prompts = builder.encode([requests[i].observation for i in chunk], [requests[i].turns for i in chunk])
            choices = [[builder.choice_ids(c, self.score_with_end) for c in requests[i].choices] for i in chunk]
            batch = pack(
                [p.ids for p in prompts],
                [p.uses_prefix for p in prompts],
                choices,
                prefix.length if prefix else 0,
                self.tokenizer.pad_token_id,
            )
            with torch.inference_mode(), self.lm.images(stack_images(prompts)):
                out = packed_forward(self.lm, batch, prefix)
            values = out.seq_logprobs.double().cpu().numpy()
            start = 0
            for i, row_choices in zip(chunk, choices, strict=True):
                results[i] = values[start : start + len(row_choices)]
                start += len(row_choices)
        return results

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        if seed is not None:
            self._generator.manual_seed(seed)
        results: list[Completion | None] = [None] * len(requests)
        for instructions, chunk in self._chunks(requests):
            builder, prefix = self.prompt_builder(instructions)
            prompts = builder.encode([requests[i].observation for i in chunk], [requests[i].turns for i in chunk])
            with torch.inference_mode(), self.lm.images(stack_images(prompts)):
                generations = generate(
                    self.lm,
                    prompts,
                    prefix,
                    max_new_tokens=max_new_tokens,
                    stop_ids=self.stop_ids | set(builder.answer_end_ids),
                    pad_id=self.tokenizer.pad_token_id,
                    temperature=temperature,
                    generator=self._generator,
                )
            for i, gen in zip(chunk, generations, strict=True):
                text = self.tokenizer.decode(gen.tokens, skip_special_tokens=True)
                results[i] = Completion(text, float(sum(gen.logprobs)), len(gen.tokens), gen.stopped)
        return [r for r in results if r is not None]

    def close(self) -> None:
        self._prompts.clear()
