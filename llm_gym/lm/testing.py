"""Tiny randomly initialised causal LMs for tests: the same architecture as the default model (Llama), a
character-level tokenizer with a ChatML chat template, written to a directory that ``--model DIR`` loads like any
other. Nothing is downloaded; building one takes well under a second."""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def tiny_tokenizer() -> object:
    """A character-level fast tokenizer over printable ASCII with ChatML special tokens."""
    characters = sorted(set(string.printable) - set("\x0b\x0c"))
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, "<unk>", *characters])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
    )
    tokenizer.chat_template = CHATML
    return tokenizer


def make_tiny_model(
    directory: str | Path,
    *,
    layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    kv_heads: int = 2,
    seed: int = 0,
    init_std: float = 0.02,
) -> Path:
    """Write a random Llama (``layers`` x ``hidden``) and the tiny tokenizer to ``directory``; returns it.

    A larger ``init_std`` (e.g. 0.5) makes the random model's next-token distributions far from uniform, so
    sampling and greedy decoding produce varied text.
    """
    directory = Path(directory)
    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        initializer_range=init_std,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
