"""Image+text models loaded with their processor (local files only, unless the user allows downloads exactly as for
text models, see :mod:`llm_gym.lm.models`); which models are image+text: :func:`llm_gym.lm.model_names.is_vision_model`."""

from __future__ import annotations

from typing import Any

from llm_gym.lm.model_names import DType, downloads_allowed, not_found, resolve_model
from llm_gym.lm.models import quiet_transformers, resolve_dtype


def load_vision_lm(
    name: str, *, dtype: DType = "auto", device: str = "cpu", image_splitting: bool | None = False
) -> tuple[Any, Any]:
    """``(model, processor)`` for an image+text model, in eval mode.

    Args:
        image_splitting: Idefics3/SmolVLM only: cut large images into tiles plus a global view (many more image
            tokens; what the model was trained with at high resolution). False (the default) sends one image of
            the processor's patch size, which is what fits a CPU; None keeps the processor's own setting.
    """
    transformers = quiet_transformers()
    source = resolve_model(name)
    local = not downloads_allowed()
    try:
        processor = transformers.AutoProcessor.from_pretrained(source, local_files_only=local)
        model = transformers.AutoModelForImageTextToText.from_pretrained(
            source, dtype=resolve_dtype(dtype, device), local_files_only=local
        )
    except OSError as exc:
        raise not_found(name) from exc
    image_processor = getattr(processor, "image_processor", None)
    if image_splitting is not None and hasattr(image_processor, "do_image_splitting"):
        image_processor.do_image_splitting = image_splitting
    tokenizer = processor.tokenizer
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()
    return model, processor
