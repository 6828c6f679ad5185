"""The built-in LM backends, registered through the same hook a third-party backend plugin uses.

Each factory imports its backend's module (torch, transformers, vllm) only when called, so listing backends costs
nothing and a missing optional package is a clear error only for the user who asks for that backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import llm_gym
from llm_gym.errors import ConfigError
from llm_gym.lm.backends.openai_compat import OpenAIBackend
from llm_gym.lm.model_names import is_vision_model


def _hf(model: str, **options: Any) -> Any:
    if is_vision_model(model):  # an image+text model: the same interface, images seen
        if options.pop("quantize", "none") != "none":
            raise ConfigError(f"quantize=int8 is for text models; {model!r} is an image+text model: use quantize=none")
        return _hf_vision(model, **options)
    from llm_gym.lm.backends.hf import HFBackend

    return HFBackend(model, **options)


def _hf_vision(model: str, **options: Any) -> Any:
    from llm_gym.lm.vision.backend import VisionBackend

    return VisionBackend(model, **options)


def _openai(model: str, **options: Any) -> Any:
    return OpenAIBackend(model, **options)


def _vllm(model: str, **options: Any) -> Any:
    from llm_gym.lm.backends.vllm_backend import VLLMBackend

    return VLLMBackend(model, **options)


@llm_gym.hookimpl
def register_backends(register: Callable[[str, Callable[..., Any]], None]) -> None:
    register("hf", _hf)
    register("hf-vision", _hf_vision)
    register("openai", _openai)
    register("vllm", _vllm)
