"""A GGUF file made into an ordinary safetensors model directory, once per machine (see
:mod:`llm_gym.lm.model_names`, which decides when; this module loads torch, transformers and gguf, so it is
imported only for that one conversion)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch
from gguf import GGUFReader
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer


def convert_gguf(gguf: Path, target: Path) -> None:
    """Write ``gguf`` as a safetensors model directory at ``target`` (atomically: temp dir + rename)."""
    logging.getLogger(__name__).warning("converting %s to safetensors in %s (once)", gguf.name, target)
    # Building the plain model initialises its weights from torch's global RNG. Without the fork, a seeded run's
    # LoRA and value head drew other numbers on a machine's first use of the model than on every later use, so the
    # same command and seed gave two different runs.
    with torch.random.fork_rng(devices=[]):
        _convert(gguf, target)


def _convert(gguf: Path, target: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    special_tokens_from_gguf(tokenizer, gguf)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF loader marks the model as quantised, which save_pretrained refuses; the tensors are plain floats by
    # now, so they go into an ordinary model built from the same config minus the quantisation entry.
    config = quantized.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        config.pop(key, None)
    config = AutoConfig.for_model(**config)
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:  # another process converted it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def special_tokens_from_gguf(tokenizer: Any, gguf: Path) -> None:
    """Set BOS, EOS and padding to the ids the GGUF file's own metadata names. transformers versions disagree when
    they read them: 5.17 makes ``<|im_start|>`` (id 1) the EOS of the default model, whose file says ``<|im_end|>``
    (id 2; 5.23 agrees). The EOS decides where an answer ends, and an adapter learns that id: one trained on a
    machine with the other conversion ended its answers with id 1, which here starts a new turn."""
    fields = GGUFReader(gguf).fields
    for key, attribute in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        field = fields.get(f"tokenizer.ggml.{key}_token_id")
        if field is None or not field.data:
            continue
        token_id = int(field.parts[field.data[0]][0])
        if 0 <= token_id < len(tokenizer):
            setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(token_id))
