"""Prompts for image+text chat models: the env's rules as the system message, the observation's images and text as
the user message, rendered by the processor's chat template and expanded (one placeholder -> the model's image
tokens) by the processor itself.

An observation is a string, a vision env's ``{"image": HxWx3, "text": str}``, or ``{"images": [...], "text": str}``
(several images in order, e.g. a reflection's before/after). The system message has no image, so its tokens form a
prefix whose KV cache is computed once, as for text models (:mod:`llm_gym.lm.prompts`); each prompt's image tokens
come right after it and are computed once per observation, however many choices are scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from llm_gym.lm.prompts import Turns, observation_text

_SENTINEL = "\x01"


def observation_images(observation: Any) -> list[Any]:
    """The images of an observation (none for text)."""
    if not isinstance(observation, Mapping):
        return []
    if "images" in observation:
        return list(observation["images"])
    return [observation["image"]] if observation.get("image") is not None else []


@dataclass
class VisionPrompt:
    """One prompt as token ids (image tokens expanded), whether it starts with the shared prefix, and its images."""

    ids: list[int]
    uses_prefix: bool
    images: dict[str, torch.Tensor] = field(default_factory=dict)
    """``pixel_values`` (1, images, 3, H, W) and, where the processor makes one, ``pixel_attention_mask``."""


class VisionPromptBuilder:
    """Chat prompts with images for one env (one system prompt) and one processor.

    Args:
        processor: a Hugging Face processor with a chat template (``processor.tokenizer`` is its tokenizer).
        instructions: the env's rules text, the system message ('' for none).
    """

    def __init__(self, processor: Any, instructions: str = "") -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.instructions = instructions
        self.image_token: str = getattr(processor, "image_token", "<image>")
        self.prefix_ids: list[int] = self._find_prefix()
        self.answer_end_ids: list[int] = self._find_answer_end()
        self._choice_cache: dict[tuple[str, bool], list[int]] = {}

    def messages(self, observation: Any, answer: str | None = None, turns: Turns = ()) -> list[dict[str, Any]]:
        """The chat messages (content lists, as processors' templates expect) for one observation, after the
        episode's earlier ``turns`` (their observation texts and moves; only the current observation's images)."""
        user = [{"type": "image"} for _ in observation_images(observation)]
        user.append({"type": "text", "text": observation_text(observation)})
        messages: list[dict[str, Any]] = []
        if self.instructions:
            messages.append({"role": "system", "content": [{"type": "text", "text": self.instructions}]})
        for earlier, move in turns:
            messages.append({"role": "user", "content": [{"type": "text", "text": observation_text(earlier)}]})
            messages.append({"role": "assistant", "content": [{"type": "text", "text": move}]})
        messages.append({"role": "user", "content": user})
        if answer is not None:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        return messages

    def text(self, observation: Any, turns: Turns = ()) -> str:
        """The whole prompt as text with one placeholder per image, ending where the answer starts."""
        return self.processor.apply_chat_template(
            self.messages(observation, turns=turns), tokenize=False, add_generation_prompt=True
        )

    def _tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode(self, observations: Sequence[Any], turns: Sequence[Turns] | None = None) -> list[VisionPrompt]:
        """Token ids (images expanded by the processor) and image tensors of each prompt (each after its
        episode's earlier ``turns``, if given)."""
        prompts = []
        n = len(self.prefix_ids)
        for observation, earlier in zip(observations, turns or [()] * len(observations), strict=True):
            text, images = self.text(observation, earlier), observation_images(observation)
            if images:
                out = self.processor(
                    text=[text],
                    images=[[np.asarray(image) for image in images]],
                    add_special_tokens=False,
                    return_tensors="pt",
                )
                ids = out["input_ids"][0].tolist()
                tensors = {k: out[k] for k in ("pixel_values", "pixel_attention_mask") if k in out}
            else:
                ids, tensors = self._tokenize(text), {}
            prompts.append(VisionPrompt(ids, n > 0 and ids[:n] == self.prefix_ids, tensors))
        return prompts

    def choice_ids(self, choice: str, with_end: bool = True) -> list[int]:
        """Token ids of ``choice`` as the whole answer, then (``with_end``) the template's end-of-answer token."""
        key = (choice, with_end)
        if key not in self._choice_cache:
            ids = self._tokenize(choice)
            if not ids:
                raise ValueError(f"choice {choice!r} has no tokens")
            self._choice_cache[key] = ids + (self.answer_end_ids if with_end else [])
        return self._choice_cache[key]

    def _find_prefix(self) -> list[int]:
        # Everything before the first image placeholder is the same for every observation; one token less, so that
        # a merge with what follows cannot hide in the last prefix token (encode() checks each prompt anyway).
        text = self.text({"images": [None], "text": "Aa"})
        cut = text.find(self.image_token)
        if cut <= 0:
            return []
        return self._tokenize(text[:cut])[:-1]

    def _find_answer_end(self) -> list[int]:
        eos = [] if self.tokenizer.eos_token_id is None else [int(self.tokenizer.eos_token_id)]
        try:
            text = self.processor.apply_chat_template(self.messages("x", answer=_SENTINEL), tokenize=False)
        except Exception:  # a template that cannot render an assistant turn: EOS ends the answer
            return eos
        after = text[text.rfind(_SENTINEL) + len(_SENTINEL) :]
        ids = self._tokenize(after) if after.strip() else []
        special = set(getattr(self.tokenizer, "all_special_ids", []))
        return [int(ids[0])] if ids and ids[0] in special else eos


def stack_images(prompts: Sequence[VisionPrompt]) -> dict[str, torch.Tensor]:
    """The images of several prompts as one ``(1, total images, 3, H, W)`` batch in prompt order (the order their
    image tokens appear in a row-major batch), zero-padded to the largest height and width; empty without images."""
    parts = [p.images for p in prompts if p.images]
    if not parts:
        return {}
    pixels = [p["pixel_values"][0] for p in parts]
    height = max(x.shape[-2] for x in pixels)
    width = max(x.shape[-1] for x in pixels)
    values, masks = [], []
    for part, x in zip(parts, pixels, strict=True):
        pad_h, pad_w = height - x.shape[-2], width - x.shape[-1]
        values.append(torch.nn.functional.pad(x, (0, pad_w, 0, pad_h)))
        mask = part.get("pixel_attention_mask")
        mask = mask[0] if mask is not None else torch.ones(x.shape[0], x.shape[-2], x.shape[-1], dtype=torch.long)
        masks.append(torch.nn.functional.pad(mask, (0, pad_w, 0, pad_h)))
    return {"pixel_values": torch.cat(values)[None], "pixel_attention_mask": torch.cat(masks)[None]}
