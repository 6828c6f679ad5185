"""LoRA products in the base model's dtype (``adapter_compute=auto``).

On a bfloat16 (or float16) base model peft keeps the LoRA weights in float32, which is what the optimiser should
update, and runs the adapter in float32 too: every LoRA'd linear layer copies its input up to float32, runs the two
rank-r products in float32, scales the float32 result, of the layer's full output width, and adds it onto the
bfloat16 output, which is then cast back down. On a 2-core CPU with AMX, doing without them made an ``sft`` step on
Trace with LoRA on every layer 1.21x faster (``benchmarks/adapter_compute.py``, docs/guides/lm.md).

:class:`AdapterCompute` runs the adapter under ``torch.autocast`` in the base dtype instead. The weights stay float32
(autocast casts the small rank-r matrices once per forward, and their gradients come back in float32 to the
optimiser); the activations never leave the base dtype. Only rounding changes: the adapter's output is rounded to the
base dtype before it is added, where peft rounds the sum, and the backward products run in the base dtype.

Nothing changes on a float32 model (every CPU without fast bfloat16: ``dtype=auto`` resolves to float32 there).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import torch

AdapterComputeMode = Literal["auto", "float32"]

_LOW_PRECISION = (torch.bfloat16, torch.float16)


class AdapterCompute:
    """A context manager factory: ``with compute():`` runs ``model``'s LoRA layers in ``dtype`` when active.

    Active when ``mode`` is ``auto``, ``dtype`` is bfloat16 or float16 and the model has LoRA layers whose weights
    are in another dtype (peft's float32). Inside, peft's cast of each LoRA layer's input to the adapter's dtype is
    switched off (autocast does the casting) and switched back on at the exit, so code outside sees plain peft."""

    def __init__(self, model: Any, dtype: torch.dtype, device: torch.device, mode: AdapterComputeMode = "auto") -> None:
        if mode not in ("auto", "float32"):
            raise ValueError(f"adapter_compute must be auto or float32, got {mode!r}")
        self.dtype = dtype
        self.device_type = device.type
        self.layers = [module for module in model.modules() if _upcasting_lora_layer(module, dtype)]
        self.active = mode == "auto" and dtype in _LOW_PRECISION and bool(self.layers)

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        previous = [getattr(layer, "cast_input_dtype_enabled", True) for layer in self.layers]
        for layer in self.layers:
            layer.cast_input_dtype_enabled = False
        try:
            with torch.autocast(device_type=self.device_type, dtype=self.dtype):
                yield
        finally:
            for layer, enabled in zip(self.layers, previous, strict=True):
                layer.cast_input_dtype_enabled = enabled


def _upcasting_lora_layer(module: Any, dtype: torch.dtype) -> bool:
    """A peft LoRA layer whose adapter weights are not in ``dtype`` (so peft casts its input to theirs)."""
    lora_a = getattr(module, "lora_A", None)
    if not isinstance(lora_a, torch.nn.ModuleDict) or not lora_a:
        return False
    return any(p.dtype != dtype for layer in lora_a.values() for p in layer.parameters())
