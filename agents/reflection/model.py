"""The model the reflection agent trains: a text LM or an image+text model, with LoRA adapters (peft) or all of its
language-model weights trainable, and the ways the rest of the agent uses it (a backend for acting, reflecting and
replaying; an encoder of training examples; saving and loading).

A checkpoint holds ``adapter/`` (``save_pretrained`` of the LoRA adapter: plain peft loads it onto the base model)
or, for a full fine-tune, ``model/`` (a complete ``save_pretrained`` directory that ``--model`` accepts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peft import LoraConfig, PeftModel, get_peft_model

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.errors import ConfigError
from llm_gym.lm.adapter_compute import AdapterCompute
from llm_gym.lm.adapter_files import save_adapter
from llm_gym.lm.backends import LMBackend
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.finetune import Encoded, Example, answer_only_labels
from llm_gym.lm.model_names import is_vision_model
from llm_gym.lm.models import load_causal_lm
from llm_gym.lm.policy import LMPolicy
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.runtime import configure_threads, default_device, quiet_peft
from llm_gym.lm.vision.backend import VisionBackend
from llm_gym.lm.vision.models import load_vision_lm
from llm_gym.lm.vision.prompts import VisionPromptBuilder
from llm_gym.runs import played_history

ADAPTER_DIR, MODEL_DIR = "adapter", "model"


def lora_target_pattern(names: tuple[str, ...]) -> str:
    """A peft ``target_modules`` regex: the named projections of the language model, never of a vision encoder."""
    return rf"^(?!.*vision).*\.({'|'.join(names)})$"


class ReflectionModel:
    """The trainable model; ``checkpoint`` (a finished iteration's) restores its adapter or weights."""

    def __init__(self, config: ReflectionConfig, checkpoint: Path | None = None) -> None:
        if config.quantize != "none":  # the shared LocalLMConfig field; this agent trains and plays in float
            raise ConfigError("reflection runs its model in float (it fine-tunes it); use quantize=none")
        self.config = config
        self.device = default_device() if config.device == "auto" else config.device
        source = config.model
        if config.finetune == "full" and checkpoint is not None:
            source = str(checkpoint / MODEL_DIR)
        self.vision = is_vision_model(source)
        if self.vision:
            base, self.processor = load_vision_lm(source, dtype=config.dtype, device=self.device)
            self.tokenizer = self.processor.tokenizer
        else:
            base, self.tokenizer = load_causal_lm(source, dtype=config.dtype, device=self.device)
            self.processor = None
        if config.finetune == "lora":
            with quiet_peft():
                self.model = self._lora(base, checkpoint)
        else:
            self.model = base
            for name, parameter in base.named_parameters():
                parameter.requires_grad_("vision" not in name)  # the image encoder stays as it is
        self.model.eval()
        self._builders: dict[str, Any] = {}
        # The LoRA products in the base dtype (text models: an image+text model's adapter keeps peft's float32).
        base_weight = next(p for name, p in self.model.named_parameters() if "lora_" not in name)
        mode = config.adapter_compute if not self.vision else "float32"
        self.adapter_compute = AdapterCompute(self.model, base_weight.dtype, base_weight.device, mode)

    def _lora(self, base: Any, checkpoint: Path | None) -> Any:
        if checkpoint is not None:
            return PeftModel.from_pretrained(base, str(checkpoint / ADAPTER_DIR), is_trainable=True)
        lora = LoraConfig(
            r=self.config.lora_rank,
            lora_alpha=self.config.lora_alpha,
            lora_dropout=self.config.lora_dropout,
            target_modules=lora_target_pattern(self.config.lora_targets),
            task_type="CAUSAL_LM",
        )
        return get_peft_model(base, lora)

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def backend(self) -> LMBackend:
        """A backend over the model as it is now (make a new one after every fine-tune: prefix caches go stale)."""
        if self.vision:
            return VisionBackend.from_model(self.model, self.processor, batch_size=self.config.batch_size)
        return HFBackend.from_model(
            self.model, self.tokenizer, batch_size=self.config.batch_size, compute=self.adapter_compute
        )

    def _builder(self, instructions: str) -> Any:
        if instructions not in self._builders:
            if self.vision:
                self._builders[instructions] = VisionPromptBuilder(self.processor, instructions)
            else:
                self._builders[instructions] = PromptBuilder(self.tokenizer, instructions)
        return self._builders[instructions]

    def encode(self, example: Example) -> Encoded:
        """The example as the policy sees it when acting, with labels on the answer only (and its images)."""
        builder = self._builder(example.instructions)
        prompt = builder.encode([example.observation], [example.turns])[0]
        encoded = answer_only_labels(prompt.ids, builder.choice_ids(example.answer, True))
        encoded.extras.update(getattr(prompt, "images", {}) or {})
        return encoded

    def save(self, directory: Path) -> None:
        if self.config.finetune == "lora":
            save_adapter(self.model, directory / ADAPTER_DIR)
        else:
            self.model.save_pretrained(str(directory / MODEL_DIR))
            (self.processor or self.tokenizer).save_pretrained(str(directory / MODEL_DIR))

    def merged(self) -> Any:
        """The model for acting only: LoRA merged into the weights (no adapter cost per token)."""
        if self.config.finetune == "lora":
            self.model = self.model.merge_and_unload()
            self.model.eval()
        return self.model


def checkpoint_policy(config: ReflectionConfig, env: EnvConfig, checkpoint: Path | None) -> LMPolicy:
    """Greedy actions of the model after the checkpoint's iteration (LoRA merged), or of the base model; with the
    earlier turns its run trained with (``history=K``) unless ``env`` gives its own."""
    configure_threads(config.threads)
    model = ReflectionModel(config, checkpoint)
    model.merged()
    return LMPolicy(
        model.backend(),
        env,
        mode=config.action_mode,
        greedy=True,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        history=played_history(env.kwargs, checkpoint),
    )
