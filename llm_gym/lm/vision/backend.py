"""The ``hf-vision`` backend: an image+text chat model (Idefics3/SmolVLM first) in this process.

Score mode packs every observation of a batch with a trie of its legal actions into one forward pass (the text
runtime's :func:`~llm_gym.lm.packing.pack` and :func:`~llm_gym.lm.forward.packed_forward`): the system prompt comes
from its KV cache, each observation's image goes through the vision encoder once, and every action is scored
exactly. Generate mode samples all prompts together (:func:`~llm_gym.lm.generation.generate`). The ``hf`` backend
hands a model over to this one when its config has a ``vision_config``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.models import DType
from llm_gym.lm.runtime import configure_threads, default_device
from llm_gym.lm.vision.forward import ImageTextLM
from llm_gym.lm.vision.models import load_vision_lm
from llm_gym.lm.vision.prompts import VisionPromptBuilder, stack_images


class VisionBackend(HFBackend):
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
        return super().from_model(model, processor, batch_size=batch_size, score_with_end=score_with_end)

    def _setup(self, model: Any, processor: Any, batch_size: int, score_with_end: bool) -> None:
        self.model, self.processor, self.tokenizer = model, processor, processor.tokenizer
        self._setup_runtime(ImageTextLM(model), batch_size, score_with_end)

    def _new_prompt_builder(self, instructions: str) -> VisionPromptBuilder:
        return VisionPromptBuilder(self.processor, instructions)

    def _forward_inputs(self, prompts: Sequence[Any]) -> AbstractContextManager[Any]:
        """Each observation's image goes through the vision encoder once, inside the packed pass."""
        return self.lm.images(stack_images(prompts))

    def _generation_stop_ids(self, builder: VisionPromptBuilder) -> set[int]:
        # A generation also ends at the chat template's end-of-answer tokens, as a scored choice does.
        return self.stop_ids | set(builder.answer_end_ids)
