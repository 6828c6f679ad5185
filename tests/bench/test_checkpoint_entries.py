"""Checkpoint entries: a real (tiny) ppo_lora run benchmarked on both splits, its training row copied into the
store, and the leaderboard still rendered, with nothing played for it, once the checkpoint is gone (a fresh clone
has the store but not runs/)."""

from __future__ import annotations

import shutil
from pathlib import Path

from llm_gym.bench.render import render_leaderboard
from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite

SUITE = """
description = "a checkpoint entry beside a baseline"
episodes = 2
num_envs = 2

[splits.heldout]
seed = 100_000_000

[splits.train]
seed = 0

[[envs]]
label = "ttt-random"
id = "OpenSpiel-tic_tac_toe-v0"
args = { opponent = "random" }
game = "tic_tac_toe"

[[entries]]
name = "random"
agent = "random"

[[entries]]
name = "tiny-ppo"
checkpoint = "RUN"
trained_on = "this test's CPU"
"""


def test_a_checkpoint_entry_plays_both_splits_and_renders_without_its_checkpoint(tmp_path: Path) -> None:
    from llm_gym.agents.ppo_lora.testing import tiny_config, train
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(
        model, total_steps=32, num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1, lora_rank=4
    )
    train(tmp_path / "run", "OpenSpiel-tic_tac_toe-v0", config)
    suite_path = tmp_path / "suite.toml"
    suite_path.write_text(SUITE.replace("RUN", str(tmp_path / "run")))
    suite = load_suite(suite_path)
    db = tmp_path / "e.sqlite"

    with EpisodeStore(db) as store:
        report = run_suite(suite, store, progress=False)
        assert report.played == 2 + 4 and not report.skipped  # random: held-out; the checkpoint: held-out + train
        rows = [r for r in store.episodes() if r.entry == "tiny-ppo"]
        assert sorted(r.split for r in rows) == ["heldout", "heldout", "train", "train"]
        assert len({r.checkpoint_hash for r in rows}) == 1 and rows[0].checkpoint_hash
        training = next(v["training"] for (name, _), v in store.entry_info().items() if name == "tiny-ppo")
    assert training["agent"] == "ppo_lora" and training["env_steps"] == 32
    assert training["device"] == "this test's CPU"  # the suite's trained_on wins over the run's "auto"
    assert training["curve"] and training["curve_metric"] == "episodic return"

    shutil.rmtree(tmp_path / "run")  # a fresh clone: the store, not the run directory
    with EpisodeStore(db) as store:
        again = run_suite(suite, store, progress=False)
        assert again.played == 0 and again.already_stored == 2
        assert "nothing played" in again.skipped["tiny-ppo"]
        assert "4 episodes of it stay" in again.skipped["tiny-ppo"]
        render_leaderboard(store, suite.name, tmp_path / "board")
    page = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "| tiny-ppo | ppo_lora | OpenSpiel-tic_tac_toe-v0 | 32 env steps |" in page
    assert (tmp_path / "board" / "plots" / "curve-tiny-ppo.svg").is_file()


def test_options_added_to_an_agent_after_a_run_keep_its_identity(tmp_path: Path) -> None:
    """A run saved before an option existed (its config.json lacks the field) keeps the identity its episodes were
    stored under; a field saved under an old name counts under the new one."""
    import dataclasses
    import json

    from llm_gym.agents.ppo_lora.testing import tiny_config, train
    from llm_gym.bench.entries import resolve_entry, short_hash
    from llm_gym.bench.suite import SuiteEntry
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    config = tiny_config(model, total_steps=16, num_envs=2, num_steps=8, minibatch_size=16, lora_rank=4)
    train(tmp_path / "run", "OpenSpiel-tic_tac_toe-v0", config)
    entry = SuiteEntry(name="tiny", checkpoint=str(tmp_path / "run"))
    now = resolve_entry(entry)
    saved_path = tmp_path / "run" / "config.json"
    saved = json.loads(saved_path.read_text())

    saved["config"]["num_minibatches"] = saved["config"].pop("max_minibatches")  # the field's old name
    saved_path.write_text(json.dumps(saved))
    assert resolve_entry(entry).entry_hash == now.entry_hash

    del saved["config"]["rollout_backend"]  # as if saved before the option was added
    saved_path.write_text(json.dumps(saved))
    older = resolve_entry(entry)
    without = {k: v for k, v in dataclasses.asdict(now.config).items() if k != "rollout_backend"}
    assert older.entry_hash == short_hash({"agent": "ppo_lora", "config": without, "checkpoint": now.checkpoint_hash})
    assert older.entry_hash != now.entry_hash
