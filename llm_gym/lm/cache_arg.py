"""The name under which a Hugging Face decoder takes and returns its KV cache.

transformers renamed it from ``past_key_values`` to ``cache`` (argument and output field); from then on the old
name warns on every call (a FutureWarning per forward, which floods a training log) and is to be removed in 5.40.
The ``vllm`` extra pins a transformers from before the rename, which knows only the old name, so the code asks the
installed version instead of choosing one."""

from __future__ import annotations

import functools
from typing import Any

from transformers.modeling_outputs import BaseModelOutputWithPast


@functools.cache
def cache_arg() -> str:
    """``"cache"`` where the installed transformers has renamed it, else ``"past_key_values"``."""
    return "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def with_cache(cache: Any) -> dict[str, Any]:
    """Keyword arguments passing ``cache`` to a decoder or decoder layer under the installed name."""
    return {cache_arg(): cache}


def output_cache(output: Any) -> Any:
    """The KV cache a decoder returned, read under the installed name."""
    return getattr(output, cache_arg())
