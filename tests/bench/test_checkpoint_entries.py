"""Checkpoint entries: a real (tiny) ppo_lora run benchmarked on both splits, its training row copied into the
store, and the leaderboard still rendered, with nothing played for it, once the checkpoint is gone (a fresh clone
has the store but not runs/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from bench_suites import (  # tests/bench_suites.py
    HELDOUT,
    RANDOM,
    TRAIN,
    TTT_RANDOM,
    Raw,
    entry,
    suite,
    train_tiny_ttt_run,
)

from llm_gym.bench.render import render_leaderboard
from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite

SUITE = suite(
    "a checkpoint entry beside a baseline",
    HELDOUT,
    TRAIN,
    TTT_RANDOM,
    RANDOM,
    entry("tiny-ppo", checkpoint="RUN", trained_on="this test's CPU"),
    episodes=2,
    num_envs=2,
)


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

    from llm_gym.bench.entries import resolve_entry, short_hash
    from llm_gym.bench.suite import SuiteEntry

    train_tiny_ttt_run(tmp_path)
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


# -- a checkpoint entry's `set`: how it plays (as `llm-gym play --checkpoint --set`), counted where it changes play --


@pytest.fixture(scope="module")
def tiny_ttt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_ttt_run(tmp_path_factory.mktemp("settings"))


SETTINGS_SUITE = suite(
    "one checkpoint, played as trained and with int8 weights",
    HELDOUT,
    TTT_RANDOM,
    entry("tiny", checkpoint="RUN", splits=["heldout"]),
    entry("tiny-int8", checkpoint="RUN", set=Raw("SETTINGS"), splits=["heldout"]),
    episodes=2,
    num_envs=2,
)


def test_a_checkpoint_entry_plays_with_its_settings(tiny_ttt_run: Path, tmp_path: Path) -> None:
    """`set = { quantize = "int8" }` on a checkpoint entry reaches the policy the bench plays (through the same
    load_policy overrides as `play --checkpoint --set`), is recorded with the entry, and keys its episodes apart."""
    from llm_gym.bench.entries import resolve_entry
    from llm_gym.lm.quantize import quantized_linear_count

    suite_path = tmp_path / "suite.toml"
    suite_path.write_text(SETTINGS_SUITE.replace("RUN", str(tiny_ttt_run)).replace("SETTINGS", '{ quantize = "int8" }'))
    suite = load_suite(suite_path)
    plain, int8 = (resolve_entry(entry) for entry in suite.entries)
    assert (plain.config.quantize, int8.config.quantize) == ("none", "int8")
    assert plain.entry_hash != int8.entry_hash and plain.checkpoint_hash == int8.checkpoint_hash
    env = suite.envs[0]
    assert quantized_linear_count(plain.policy(env)[0].backend.model) == 0
    assert quantized_linear_count(int8.policy(env)[0].backend.model) == 2 * 7  # every decoder Linear of both layers

    with EpisodeStore(tmp_path / "e.sqlite") as store:
        report = run_suite(suite, store, progress=False)
        assert report.played == 4 and not report.skipped
        hashes = {(r.entry, r.entry_hash) for r in store.episodes()}
        info = store.entry_info()
    assert hashes == {("tiny", plain.entry_hash), ("tiny-int8", int8.entry_hash)}
    assert info[("tiny-int8", int8.entry_hash)]["config"]["quantize"] == "int8"
    assert info[("tiny", plain.entry_hash)]["config"]["quantize"] == "none"


def test_settings_count_in_a_checkpoint_identity_only_where_they_change_play(
    tiny_ttt_run: Path, tmp_path: Path
) -> None:
    """A setting equal to what the run plays with anyway (its saved value, or the default of a field the run predates)
    keeps the identity its stored episodes have; a setting that changes play is a new identity, the same whether or not
    the run's config names the field."""
    import json

    from llm_gym.bench.entries import resolve_entry
    from llm_gym.bench.suite import SuiteEntry

    run = tmp_path / "run"
    shutil.copytree(tiny_ttt_run, run)

    def entry_hash(**settings: object) -> str:
        return resolve_entry(SuiteEntry(name="tiny", checkpoint=str(run), settings=settings)).entry_hash

    plain, int8 = entry_hash(), entry_hash(quantize="int8")
    assert entry_hash(quantize="none", threads=1, dtype="float32") == plain  # the run's own values: tiny_config's
    assert int8 != plain
    # threads is speed-only: it changes how fast the checkpoint plays, never what, so it never replays an episode.
    assert entry_hash(threads=2) == entry_hash(threads=3) == plain

    saved_path = run / "config.json"
    saved = json.loads(saved_path.read_text())
    del saved["config"]["quantize"]  # as if trained before quantize existed, like the committed leaderboard's runs
    saved_path.write_text(json.dumps(saved))
    older = entry_hash()
    assert older != plain  # (the hash counts only the fields the run saved)
    assert entry_hash(quantize="none") == older, "stored episodes of a run that predates quantize keep their identity"
    assert entry_hash(quantize="int8") == int8


def test_an_unknown_setting_of_a_checkpoint_entry_is_one_line_with_suggestions(
    tiny_ttt_run: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from llm_gym.cli import build_app

    suite_path = tmp_path / "suite.toml"
    suite_path.write_text(SETTINGS_SUITE.replace("RUN", str(tiny_ttt_run)).replace("SETTINGS", '{ quantise = "int8" }'))
    db = tmp_path / "e.sqlite"
    args = ["bench", "--suite", str(suite_path), "--db", str(db), "--no-progress"]
    result = CliRunner().invoke(build_app(), args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "entry 'tiny-int8': unknown key 'quantise'" in lines[0] and "did you mean quantize?" in lines[0]
    with EpisodeStore(db) as store:
        assert list(store.episodes()) == [], "nothing is played before every entry checks out"


def test_a_setting_a_checkpoint_cannot_play_with_is_refused_in_one_line(tiny_ttt_run: Path, tmp_path: Path) -> None:
    """A checkpoint entry's `set` goes through the same check as `llm-gym play --checkpoint --set`: a field only
    training reads, or one the weights fix, is refused naming it and the entry, before anything is played."""
    from typer.testing import CliRunner

    from llm_gym.cli import build_app

    refusals = {
        "{ learning_rate = 0.001, update_epochs = 3 }": (
            f"learning_rate=0.001, update_epochs=3 only affect training, not how {tiny_ttt_run} plays: drop them "
            "from the set of entry 'tiny-int8'"
        ),
        "{ lora_rank = 8 }": "trained with lora_rank=4, which its checkpoint holds; it plays as trained: drop lora_rank "
        "from the set of entry 'tiny-int8'",
        '{ model = "smollm2-135m" }': "its weights play only on that model; drop model from the set of entry 'tiny-int8'",
    }
    db = tmp_path / "e.sqlite"
    for settings, expected in refusals.items():
        suite_path = tmp_path / "suite.toml"
        suite_path.write_text(SETTINGS_SUITE.replace("RUN", str(tiny_ttt_run)).replace("SETTINGS", settings))
        result = CliRunner().invoke(
            build_app(), ["bench", "--suite", str(suite_path), "--db", str(db), "--no-progress"]
        )
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert expected in lines[0], lines[0]
    with EpisodeStore(db) as store:
        assert list(store.episodes()) == [], "nothing is played before every entry checks out"
