from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.bench.suite import HELDOUT, load_suite, suite_names
from llm_gym.errors import ConfigError, UnknownNameError


def test_shipped_suites_parse() -> None:
    names = suite_names()
    assert {"smoke", "standard"} <= set(names)
    for name in names:
        suite = load_suite(name)
        assert suite.envs and suite.entries and HELDOUT in suite.splits


def test_every_entry_meets_the_same_seeds_and_tasks(tiny_suite: Path) -> None:
    suite = load_suite(tiny_suite)
    episodes = suite.episodes()
    by_entry: dict[str, set] = {}
    for spec in episodes:
        by_entry.setdefault(spec.entry, set()).add((spec.env_label, spec.seed, spec.task_id))
    assert by_entry["scripted"] <= by_entry["random"]
    assert {s.seed for s in episodes if s.env_label == "breakout"} == {100_000_000, 100_000_001}
    # Agents play the held-out split only; only checkpoint entries also play the train split.
    assert {s.split for s in episodes} == {HELDOUT}


def test_held_out_seeds_are_disjoint_from_training_seeds() -> None:
    for name in suite_names():
        suite = load_suite(name)
        if "train" not in suite.splits:
            continue
        heldout = {s.seed for s in suite.episodes() if s.split == HELDOUT}
        train = {s.seed for s in suite.episodes() if s.split == "train"}
        assert not heldout & train


def test_unknown_names_get_suggestions(tiny_suite: Path) -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'smoke'"):
        load_suite("smok")
    suite = load_suite(tiny_suite)
    with pytest.raises(UnknownNameError, match="did you mean 'random'"):
        suite.select(entries=["randon"])
    with pytest.raises(UnknownNameError, match="did you mean 'breakout'"):
        suite.select(envs=["breakot"])


def test_bad_suite_files_are_one_line_errors(tmp_path: Path, tiny_suite: Path) -> None:
    text = tiny_suite.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('id = "LLMBreakout-text-v0"', 'id = "LLMBreakot-text-v0"'))
    with pytest.raises(UnknownNameError, match="LLMBreakout-text-v0"):
        load_suite(bad)
    bad.write_text(text.replace("max_steps = 20", "max_step = 20"))
    with pytest.raises(UnknownNameError, match="did you mean 'max_steps'"):
        load_suite(bad)
    bad.write_text(text.replace('envs = ["breakout"]', 'envs = ["nothing-*"]'))
    with pytest.raises(ConfigError, match="match no env"):
        load_suite(bad)
    bad.write_text("episodes = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_suite(bad)


def test_every_atari_env_has_a_fire_twin_and_every_entry_plays_both() -> None:
    """Trained LM policies play the FIRE-on-reset game they learned; the raw rows stay beside them."""
    suite = load_suite("standard")
    atari = [env for env in suite.envs if env.env_id.startswith("LLM")]
    raw = [env for env in atari if "-fire-" not in env.label]
    assert {env.label.split("-")[0] for env in raw} == {"breakout", "pong"}
    for env in raw:
        twin = suite.env(env.label.replace("-", "-fire-", 1))
        assert twin.env_id == env.env_id and twin.game == env.game and twin.max_steps == env.max_steps
        assert dict(twin.args) == {**env.args, "fire_on_reset": True}  # whole games: no terminal_on_life_loss
        assert "fire_on_reset" not in env.args
        for entry in suite.entries:
            assert entry.plays(env) == entry.plays(twin), (entry.name, env.label)
    assert any(entry.checkpoint for entry in suite.entries if any(entry.plays(env) for env in atari))


def test_trained_on_belongs_to_checkpoint_entries(tmp_path: Path, tiny_suite: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(tiny_suite.read_text().replace('agent = "scripted"\n', 'agent = "scripted"\ntrained_on = "x"\n'))
    with pytest.raises(ConfigError, match="trained_on describes a checkpoint"):
        load_suite(bad)
