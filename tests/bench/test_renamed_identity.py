"""A field renamed after episodes were stored (sft's ``batch_size`` and ``warmup_steps``, now ``minibatch_size`` and
``warmup_updates``) replays nothing: the store's identity, hashed under the old names, stays the entry's. Real
suites, a real sft config and run directory, a real SQLite store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from bench_suites import HELDOUT, TTT_RANDOM, entry, store_draws, suite  # tests/bench_suites.py

from llm_gym.bench.entries import keep_stored_identity, resolve_entry, short_hash
from llm_gym.bench.runner import plan, resolve_entries
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import SuiteEntry, load_suite
from llm_gym.config import to_dict
from llm_gym.plugins import get_agent
from llm_gym.runs import Run

OLD_NAMES = {"minibatch_size": "batch_size", "warmup_updates": "warmup_steps"}
"""sft's fields under the names its configs were stored under before the rename (new -> old)."""


def before_the_rename(config: dict) -> dict:
    """A config dict as it was written (and hashed) while sft's fields had their old names."""
    return {OLD_NAMES.get(k, k): v for k, v in config.items()}


def test_an_agent_entry_stored_under_the_old_names_keeps_its_identity(tmp_path: Path) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(suite("sft untrained", HELDOUT, TTT_RANDOM, entry("sft", agent="sft"), episodes=2))
    bench = load_suite(path)
    now = resolve_entries(bench)[0]["sft"]
    stored_config = before_the_rename(dataclasses.asdict(now.config))
    old_hash = short_hash({"agent": "sft", "config": stored_config, "checkpoint": None})
    assert old_hash != now.entry_hash  # the names are part of the hash: without the mapping, a replay
    env = bench.env("ttt-random")
    assert now.reads_text  # as store_draws stores it
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        store_draws(store, bench, env, "sft", old_hash, stored_config)
        kept = resolve_entries(bench, store)[0]["sft"]
        assert kept.entry_hash == old_hash
        assert plan(bench, {"sft": kept}, store) == ([], 2)  # nothing to replay
        # A setting changed (under any name) is still a new identity.
        changed = tmp_path / "changed.toml"
        changed.write_text(path.read_text().replace('agent = "sft"', 'agent = "sft"\nset = { max_new_tokens = 8 }'))
        assert resolve_entries(load_suite(changed), store)[0]["sft"].entry_hash not in (old_hash, now.entry_hash)


def test_a_checkpoint_saved_under_the_old_names_has_the_new_names_identity_and_keeps_the_stored_one(
    tmp_path: Path,
) -> None:
    new_config = to_dict(get_agent("sft").Config(minibatch_size=64, warmup_updates=5, demos="d.jsonl"))
    # An sft run directory with one checkpoint (the identity hashes its files; nothing here loads them), saved while
    # the fields had their old names.
    run = Run.create("OpenSpiel-tic_tac_toe-v0", "sft", before_the_rename(new_config), path=tmp_path / "run")
    with run.checkpoint(10) as directory:
        (directory / "adapter_model.safetensors").write_bytes(b"weights")
    run.close()
    entry = SuiteEntry(name="e", checkpoint=str(tmp_path / "run"))
    old = resolve_entry(entry)
    saved_path = tmp_path / "run" / "config.json"
    saved = json.loads(saved_path.read_text())
    saved["config"] = new_config  # the same run, saved under the new names
    saved_path.write_text(json.dumps(saved))
    new = resolve_entry(entry)
    assert old.entry_hash == new.entry_hash  # the old-named setting and the new name: one identity

    # The leaderboard's sft entries were hashed before the rename, under the old names: that identity is kept.
    stored_config = before_the_rename(new_config)
    stored_hash = short_hash({"agent": "sft", "config": stored_config, "checkpoint": old.checkpoint_hash})
    stored = {("e", stored_hash): {"agent": "sft", "config": stored_config}}
    for resolved in (old, new):
        assert resolved.entry_hash != stored_hash
        assert keep_stored_identity(resolved, stored).entry_hash == stored_hash
    assert keep_stored_identity(old, {}).entry_hash == old.entry_hash
