"""The tokenizer a checkpoint was trained with, recorded beside its adapter and checked where it is loaded.

An adapter is trained on token ids, not text. The default model is converted from its GGUF file on each machine by
the installed ``transformers``, and conversions by different versions need not agree on the special tokens: a
tic-tac-toe adapter trained on one machine had learnt to end every answer with id 1 (``<|im_start|>`` here), where
this machine's chat template ends answers with id 2 (``<|im_end|>``), so its answer probabilities here were 1e-4
instead of 0.86 and its action scores were not those it was trained with. ``adapter/llm_gym_tokens.json`` records
the ids that matter (the special tokens, the end-of-answer token, the vocabulary's size and hash); loading a
checkpoint whose record differs from the tokenizer at hand warns in one line. Checkpoints written before the record
existed are not checked.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOKENS_FILE = "llm_gym_tokens.json"


class TokenizerMismatchWarning(UserWarning):
    """A checkpoint was trained with other token ids than the tokenizer it is loaded with."""


def tokenizer_record(tokenizer: Any, answer_end_ids: Sequence[int]) -> dict[str, Any]:
    """What a checkpoint's adapter depends on: special token ids, the end-of-answer ids and the vocabulary."""
    vocabulary = sorted(tokenizer.get_vocab().items())
    digest = hashlib.sha256(json.dumps(vocabulary, ensure_ascii=False).encode()).hexdigest()
    special = dict(zip(tokenizer.all_special_tokens, (int(i) for i in tokenizer.all_special_ids), strict=True))
    return {
        "special_tokens": dict(sorted(special.items())),
        "answer_end_ids": [int(i) for i in answer_end_ids],
        "vocab_size": len(vocabulary),
        "vocab_sha256": digest,
    }


def write_tokenizer_record(adapter_dir: Path, tokenizer: Any, answer_end_ids: Sequence[int]) -> None:
    (Path(adapter_dir) / TOKENS_FILE).write_text(json.dumps(tokenizer_record(tokenizer, answer_end_ids), indent=1))


def check_tokenizer_record(adapter_dir: Path, tokenizer: Any, answer_end_ids: Sequence[int]) -> bool:
    """Warn (once per call) where the adapter's recorded tokenizer differs from this one; True when they agree or
    the checkpoint has no record."""
    path = Path(adapter_dir) / TOKENS_FILE
    if not path.is_file():
        return True
    try:
        trained = json.loads(path.read_text())
    except (OSError, ValueError):
        return True  # an unreadable record is no evidence either way; the adapter itself is checked elsewhere
    here = tokenizer_record(tokenizer, answer_end_ids)
    differences = [
        f"{key} {trained.get(key)} there, {here[key]} here"
        for key in ("answer_end_ids", "special_tokens", "vocab_size", "vocab_sha256")
        if trained.get(key) != here[key]
    ]
    if not differences:
        return True
    warnings.warn(
        f"{adapter_dir.parent} was trained with other token ids ({differences[0]}): the model was converted by "
        "another transformers version, so its scores here are not those it was trained with; play or train it "
        "where it was trained, or continue training here (sft --set init_adapter=...) to adapt it",
        TokenizerMismatchWarning,
        stacklevel=3,
    )
    return False
