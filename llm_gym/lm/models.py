"""``--model`` names -> loaded ``(model, tokenizer)`` (what a name means and where it is cached:
:mod:`llm_gym.lm.model_names`).

This module imports torch and transformers at its top: only code that is about to load a model imports it (the
backends, the trainers), never the CLI's listing paths, which use :mod:`llm_gym.lm.model_names`.
"""

from __future__ import annotations

from typing import Any

import torch

from llm_gym.errors import MissingDependencyError
from llm_gym.lm.cpu import has_fast_bf16
from llm_gym.lm.model_names import (
    DEFAULT_MODEL,
    DType,
    ModelNotFoundError,
    downloads_allowed,
    not_found,
    resolve_model,
)

try:
    import transformers
except ImportError as exc:  # the lm extra: the one line that says how to install it, wherever a model first loads
    raise MissingDependencyError("the LM runtime", "lm") from exc

__all__ = [
    "DEFAULT_MODEL",
    "DType",
    "ModelNotFoundError",
    "load_causal_lm",
    "load_tokenizer",
    "quiet_transformers",
    "resolve_dtype",
    "resolve_model",
]


def resolve_dtype(dtype: DType, device: str = "cpu") -> torch.dtype:
    """``auto``: bfloat16 where the hardware has fast bf16 matmuls (CPU AMX/AVX512-BF16, CUDA sm80+), else float32."""
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device == "cpu" and has_fast_bf16():
        return torch.bfloat16
    return torch.float32


def quiet_transformers() -> Any:
    """``transformers`` with its loading bars and notices off: on every load they would drown the training progress
    bar."""
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def load_tokenizer(name: str = DEFAULT_MODEL) -> Any:
    """The tokenizer of ``name`` (resolved as in :func:`load_causal_lm`)."""
    source = resolve_model(name)
    quiet_transformers()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=not downloads_allowed())
    except OSError as exc:
        raise not_found(name) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(name: str = DEFAULT_MODEL, *, dtype: DType = "auto", device: str = "cpu") -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``name``, in eval mode, on ``device``, in ``dtype``.

    Raises:
        ModelNotFoundError: ``name`` is no alias, local path or locally cached HF model.
    """
    tokenizer = load_tokenizer(name)
    source = resolve_model(name)
    torch_dtype = resolve_dtype(dtype, device)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, local_files_only=not downloads_allowed()
        )
    except OSError as exc:
        raise not_found(name) from exc
    model.to(device)
    model.eval()
    return model, tokenizer
