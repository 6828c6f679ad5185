"""A checkpoint records the tokenizer its adapter was trained with (``adapter/llm_gym_tokens.json``); loading it
with a tokenizer whose end-of-answer or special ids differ warns in one line, in training (``init_adapter``) and in
play; checkpoints without the record load silently."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.policy import checkpoint_policy
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.agents.ppo_lora.testing import train as train_ppo
from llm_gym.agents.ppo_lora.tokens import TOKENS_FILE, TokenizerMismatchWarning
from llm_gym.agents.ppo_lora.train import initial_actor_critic

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=64)
    config = tiny_config(model, total_steps=8, num_envs=2, num_steps=4, minibatch_size=4, checkpoint_every=8)
    summary, _ = train_ppo(tmp_path_factory.mktemp("run") / "ppo", TTT, config)
    return model, Path(summary["checkpoint"])


def test_the_record_is_written_and_a_matching_tokenizer_loads_silently(checkpoint) -> None:
    model, path = checkpoint
    record = json.loads((path / "adapter" / TOKENS_FILE).read_text())
    assert record["answer_end_ids"] and record["vocab_size"] > 0 and record["special_tokens"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TokenizerMismatchWarning)
        checkpoint_policy(tiny_config(model), EnvConfig(TTT), path)
        initial_actor_critic(tiny_config(model, init_adapter=str(path)), "rules", None)


def test_other_token_ids_warn_in_one_line_in_play_and_training(checkpoint, tmp_path: Path) -> None:
    model, path = checkpoint
    # The run as if trained on a machine whose conversion of the model ended answers with another token: its
    # record says so, and its manifest is that machine's (so the checkpoint verifies).
    run = tmp_path / "elsewhere"
    shutil.copytree(path.parent.parent, run)
    moved = run / "checkpoints" / path.name
    record = json.loads((moved / "adapter" / TOKENS_FILE).read_text())
    record["answer_end_ids"] = [record["answer_end_ids"][0] + 1]
    _rewrite(moved, f"adapter/{TOKENS_FILE}", json.dumps(record).encode())
    with pytest.warns(TokenizerMismatchWarning, match=r"answer_end_ids \[\d+\] there, \[\d+\] here") as caught:
        checkpoint_policy(tiny_config(model), EnvConfig(TTT), moved)
    assert "\n" not in str(caught[0].message)
    with pytest.warns(TokenizerMismatchWarning):
        initial_actor_critic(tiny_config(model, init_adapter=str(moved)), "rules", None)
    (moved / "adapter" / TOKENS_FILE).unlink()  # a checkpoint from before the record: no check, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", TokenizerMismatchWarning)
        checkpoint_policy(tiny_config(model), EnvConfig(TTT), moved)


def _rewrite(checkpoint: Path, name: str, data: bytes) -> None:
    """Replace one file of a checkpoint and its manifest entry (size, SHA-256)."""
    (checkpoint / name).write_bytes(data)
    manifest = json.loads((checkpoint / "checkpoint.json").read_text())
    manifest["files"][name] = [len(data), hashlib.sha256(data).hexdigest()]
    (checkpoint / "checkpoint.json").write_text(json.dumps(manifest))
