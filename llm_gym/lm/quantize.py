"""``quantize=int8``: the decoder's Linear layers with int8 weights, for CPU inference (playing, benchmarking).

Dynamic quantization: each Linear's weights are stored as int8 with one scale per output channel; at run time its
input is quantized per batch (dynamic range), the matmul runs in int8 with int32 accumulation (fbgemm on x86,
qnnpack on ARM) and the result comes back as float32. Embeddings, norms, attention and the LM head stay float32:
the head (tied to the embedding in SmolLM2) runs only on the few positions that predict an answer token
(:mod:`llm_gym.lm.packing`), and a float head keeps the action log-probs closest to the float model's.

Why torch's eager ``quantize_dynamic``: torch 2.13 marks ``torch.ao.quantization`` deprecated (pointing at the
``torchao`` package), but it is still the only int8 CPU matmul in torch that is fast without ``torch.compile``: on an
AVX2 EPYC its fbgemm kernel ran a 576x1536 Linear pair ~1.6x faster than float32, while ``torch._int_mm`` and
``torch._weight_int8pack_mm`` (the ops the newer paths build on) ran ~55x slower than float32 there. Its warnings
are silenced where it is called, and a torch without it gets one line (:func:`check_quantize`).

Quantization is for acting only: training (LoRA, full fine-tunes) stays float, and a LoRA adapter is merged into the
base weights before they are quantized (``llm-gym play --checkpoint`` of a ppo_lora / sft run).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import torch

from llm_gym.errors import ConfigError, UnknownNameError

Quantize = Literal["none", "int8"]
QUANTIZE_CHOICES: tuple[str, ...] = ("none", "int8")
_ENGINES = ("x86", "fbgemm", "qnnpack")  # the quantized engines with a dynamic int8 Linear, best first


def check_quantize(quantize: str, *, device: str = "cpu", dtype: str = "auto") -> None:
    """Raise one clear error where ``quantize`` cannot be used with this device and dtype; ``none`` always passes.

    Raises:
        UnknownNameError: ``quantize`` is no known mode (with close matches).
        ConfigError: int8 on a non-CPU device, with a non-float32 dtype, or on a torch without dynamic quantization.
    """
    if quantize not in QUANTIZE_CHOICES:
        raise UnknownNameError("quantize value", str(quantize), QUANTIZE_CHOICES, "(choose none or int8)")
    if quantize == "none":
        return
    if not device.startswith("cpu"):
        raise ConfigError(
            f"quantize={quantize} runs on the CPU only (torch's int8 kernels are CPU kernels); on {device} use "
            "quantize=none (and dtype=bfloat16 for half the weight memory), or set device=cpu"
        )
    if dtype not in ("auto", "float32"):
        raise ConfigError(f"quantize={quantize} computes in float32 around its int8 matmuls; use dtype=float32 or auto")
    if _dynamic_quantizer() is None or _engine() is None:
        raise ConfigError(
            f"quantize={quantize} needs torch's dynamic quantization (torch.ao.quantization.quantize_dynamic with "
            f"an fbgemm, x86 or qnnpack engine), which torch {torch.__version__} here lacks; use quantize=none"
        )


def quantize_model(model: Any, quantize: str = "int8") -> Any:
    """``model`` (a transformers causal LM in float32 on the CPU) with its decoder's Linear layers int8, in place;
    returned for chaining. ``none`` returns it unchanged.

    Raises:
        ConfigError: the model carries LoRA adapters (merge them first: training stays float), or is not float32
            on the CPU; or as :func:`check_quantize`.
    """
    check_quantize(quantize)
    if quantize == "none":
        return model

    if hasattr(model, "peft_config") or any("lora_" in name for name, _ in model.named_modules()):
        raise ConfigError(
            f"quantize={quantize} is for playing only: this model has trainable LoRA adapters (training stays "
            "float); merge the adapter first (merge_and_unload), as `llm-gym play --checkpoint` does"
        )
    parameter = next(model.parameters())
    if parameter.device.type != "cpu" or parameter.dtype != torch.float32:
        raise ConfigError(
            f"quantize={quantize} needs the model in float32 on the CPU, not {parameter.dtype} on {parameter.device}"
        )
    quantize_dynamic, per_channel = _dynamic_quantizer()  # type: ignore[misc]  (checked above)
    torch.backends.quantized.engine = _engine()
    decoder = model.get_decoder()
    with warnings.catch_warnings():  # the deprecation notices this module's docstring answers
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_(tensor|channel).*")
        quantize_dynamic(decoder, {torch.nn.Linear: per_channel}, inplace=True)
    model.eval()
    return model


def is_quantized_linear(module: Any) -> bool:
    """True for a dynamically quantized Linear layer (what :func:`quantize_model` puts in place of a float one)."""
    return type(module).__name__ == "Linear" and ".quantized." in type(module).__module__


def quantized_linear_count(model: Any) -> int:
    """How many dynamically quantized Linear layers ``model`` holds (0 for a float model)."""
    return sum(is_quantized_linear(module) for module in model.modules())


def _dynamic_quantizer() -> tuple[Any, Any] | None:
    """``(quantize_dynamic, per_channel_dynamic_qconfig)`` from this torch, or None where it has them no more."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
        except ImportError:
            return None
    return quantize_dynamic, per_channel_dynamic_qconfig


def _engine() -> str | None:
    supported = torch.backends.quantized.supported_engines
    return next((engine for engine in _ENGINES if engine in supported), None)
