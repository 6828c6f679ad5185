"""Writing a LoRA adapter so that the same weights always give the same files, or folded into its base model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peft import PeftModel
from peft.utils import CONFIG_NAME  # the file name peft writes and reads

from llm_gym.lm.model_names import DType
from llm_gym.lm.models import load_causal_lm
from llm_gym.lm.runtime import quiet_peft


def save_adapter(model: Any, directory: Path) -> None:
    """``save_pretrained`` of a peft model (plain peft loads the directory), with its config written in a fixed order.

    peft holds fields such as ``target_modules`` as sets and writes them in hash order, which changes from one
    process to the next; two runs that trained the same weights then saved different ``adapter_config.json`` files,
    and checkpoint hashes could not be compared across runs. Sorting those fields fixes the bytes, not the meaning.
    """
    # The active adapter alone: ppo_lora's frozen reference adapter (kl_reference=start) is not part of the policy.
    model.save_pretrained(str(directory), selected_adapters=[model.active_adapter])
    config = model.peft_config[model.active_adapter]
    path = directory / CONFIG_NAME
    saved = json.loads(path.read_text())
    for name, value in saved.items():
        if isinstance(getattr(config, name, None), set) and isinstance(value, list):
            saved[name] = sorted(value, key=str)
    # The same layout as peft's own writer, so a file it wrote and one written here differ only in that order.
    path.write_text(json.dumps(saved, indent=2, sort_keys=True))


def save_merged(adapter: Path, base_model: str, out: Path, *, dtype: DType = "float32") -> None:
    """The LoRA adapter saved in ``adapter`` folded into the weights of ``base_model`` (a ``--model`` name), written
    with the tokenizer to ``out``: a directory that ``AutoModelForCausalLM.from_pretrained`` loads without peft."""
    model, tokenizer = load_causal_lm(base_model, dtype=dtype, device="cpu")
    with quiet_peft():
        merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
