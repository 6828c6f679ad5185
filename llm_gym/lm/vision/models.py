"""Image+text models: recognise one from its config and load it with its processor (local files only, unless the
user allows downloads exactly as for text models, see :mod:`llm_gym.lm.models`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_gym.lm.models import (
    MODEL_ALIASES,
    DType,
    _not_found,
    _require,
    downloads_allowed,
    quiet_transformers,
    resolve_dtype,
    resolve_model,
)


def is_vision_model(name: str) -> bool:
    """True when ``name`` (a local directory or a cached HF id) is an image+text model (its config has a
    ``vision_config``)."""
    if name in MODEL_ALIASES or name.endswith(".gguf"):
        return False
    source = resolve_model(name)
    if isinstance(source, Path):
        try:
            return "vision_config" in json.loads((source / "config.json").read_text())
        except (OSError, ValueError):
            return False
    try:
        from transformers import AutoConfig  # the lm extra (a missing one answers False)

        config = AutoConfig.from_pretrained(source, local_files_only=not downloads_allowed())
    except (OSError, ValueError, ImportError):
        return False
    return getattr(config, "vision_config", None) is not None


def load_vision_lm(
    name: str, *, dtype: DType = "auto", device: str = "cpu", image_splitting: bool | None = False
) -> tuple[Any, Any]:
    """``(model, processor)`` for an image+text model, in eval mode.

    Args:
        image_splitting: Idefics3/SmolVLM only: cut large images into tiles plus a global view (many more image
            tokens; what the model was trained with at high resolution). False (the default) sends one image of
            the processor's patch size, which is what fits a CPU; None keeps the processor's own setting.
    """
    _require("transformers", "the LM runtime", "lm")
    transformers = quiet_transformers()
    source = resolve_model(name)
    local = not downloads_allowed()
    try:
        processor = transformers.AutoProcessor.from_pretrained(source, local_files_only=local)
        model = transformers.AutoModelForImageTextToText.from_pretrained(
            source, dtype=resolve_dtype(dtype, device), local_files_only=local
        )
    except OSError as exc:
        raise _not_found(name) from exc
    image_processor = getattr(processor, "image_processor", None)
    if image_splitting is not None and hasattr(image_processor, "do_image_splitting"):
        image_processor.do_image_splitting = image_splitting
    tokenizer = processor.tokenizer
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()
    return model, processor
