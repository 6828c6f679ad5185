"""Writing a LoRA adapter so that the same weights always give the same files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peft.utils import CONFIG_NAME  # the file name peft writes and reads


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
