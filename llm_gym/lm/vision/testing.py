"""A tiny randomly initialised Idefics3 (the SmolVLM architecture: SigLIP-style vision encoder, pixel-shuffle
connector, Llama text model) with a processor built locally from the character-level test tokenizer and SmolVLM's
chat template. Written to a directory that ``--model DIR`` loads like a real SmolVLM. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

from llm_gym.lm.testing import tiny_tokenizer

# SmolVLM's chat template (an image placeholder per {"type": "image"} entry, <end_of_utterance> ends each turn).
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
IMAGE_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>")


def make_tiny_vision_model(
    directory: str | Path,
    *,
    layers: int = 2,
    hidden: int = 64,
    vision_hidden: int = 32,
    image_size: int = 64,
    patch_size: int = 8,
    seed: int = 0,
    init_std: float = 0.02,
) -> Path:
    """Write a random Idefics3 and its processor to ``directory``; returns it.

    Each image becomes ``(image_size / patch_size)**2 / 4`` image tokens (16 with the defaults); images are resized
    to ``image_size`` square (no tiling), like a real SmolVLM with ``do_image_splitting=False``.
    """
    directory = Path(directory)
    tokenizer = tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", *IMAGE_TOKENS]})
    tokenizer.eos_token = "<end_of_utterance>"
    image_processor = Idefics3ImageProcessorPil(
        do_resize=True,
        size={"longest_edge": image_size},
        max_image_size={"longest_edge": image_size},
        do_image_splitting=False,
    )
    scale_factor = 2
    image_seq_len = (image_size // patch_size) ** 2 // scale_factor**2
    processor = Idefics3Processor(
        image_processor, tokenizer, image_seq_len=image_seq_len, chat_template=SMOLVLM_TEMPLATE
    )
    config = Idefics3Config(
        vision_config={
            "hidden_size": vision_hidden,
            "intermediate_size": 2 * vision_hidden,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": image_size,
            "patch_size": patch_size,
            "initializer_range": init_std,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": True,
            "initializer_range": init_std,
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "bos_token_id": None,
        },
        scale_factor=scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory
