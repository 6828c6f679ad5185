"""Presets: TOML recipes beside an agent's module, found the same way for built-in and third-party agents, listed by
``llm-gym agents NAME`` and used by ``llm-gym train --preset NAME`` (defaults <- preset <- --config <- --set)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest
from echo_plugin import echo_plugin  # tests/plugins/echo_plugin.py

from llm_gym.config import load_config_file
from llm_gym.errors import ConfigError, UnknownNameError
from llm_gym.plugins import agents, get_agent
from llm_gym.presets import agent_presets, get_preset, read_preset
from llm_gym.testing import error_line, invoke

AGENT_PLUGIN = echo_plugin()

LEARNERS_WITH_QUICK = ("ppo_lora", "sft", "nanogpt_ppo", "reflection", "curriculum")

QUICK = """
description = "Always action 1 on Kuhn poker: the smallest run there is"
env = "OpenSpiel-kuhn_poker-v0"

[config]
always = 1
total_steps = 8
"""


def install_echo_with_presets(install_plugin, tmp_path: Path) -> Path:
    """The echo agent of the hook tests as a third-party plugin, with a presets/ folder beside its module."""
    install_plugin("llm_gym_echo", AGENT_PLUGIN)
    folder = tmp_path / "llm_gym_echo" / "presets"
    folder.mkdir()
    (folder / "quick.toml").write_text(QUICK)
    (folder / "needs_demos.toml").write_text(
        textwrap.dedent("""
        description = "Trains on a file a command makes first"
        [before]
        creates = "no/such/demos.jsonl"
        command = "llm-gym demos --agent random --env OpenSpiel-kuhn_poker-v0 --out no/such/demos.jsonl"
        """)
    )
    return folder


def test_every_shipped_preset_reads_and_applies() -> None:
    for name, cls in agents().items():
        for preset in agent_presets(cls).values():
            config = preset.apply(cls)  # every key is a field of the agent's config, every value valid
            assert isinstance(config, cls.Config), (name, preset.name)
            assert preset.env is None or preset.env in gym.registry, (name, preset.name, preset.env)
            assert load_config_file(preset.source) == dict(preset.config)  # a preset file is a --config file too


def test_the_learners_ship_a_quick_preset() -> None:
    for name in LEARNERS_WITH_QUICK:
        quick = get_preset(get_agent(name), "quick")
        assert quick.env is not None and "minute" in quick.description, (name, quick.description)  # says how long
    from llm_gym.agents.curriculum.train import base_agent

    curriculum = get_agent("curriculum")
    learner = base_agent(get_preset(curriculum, "quick").apply(curriculum))  # its base_config is the learner's own
    assert learner.config.eval_episodes > 0  # a before and an after


def test_a_third_party_agent_ships_presets_beside_its_module(install_plugin, tmp_path: Path) -> None:
    install_echo_with_presets(install_plugin, tmp_path)
    presets = agent_presets(get_agent("echo"))
    assert list(presets) == ["needs_demos", "quick"]
    assert presets["quick"].config == {"always": 1, "total_steps": 8}

    listing = invoke("agents", "echo")
    assert listing.exit_code == 0 and "quick" in listing.output and "--preset NAME" in listing.output
    shown = json.loads(invoke("agents", "echo", "--json").output)
    assert [p["name"] for p in shown["presets"]] == ["needs_demos", "quick"]
    assert json.loads(invoke("agents", "--json").output)[0].keys() >= {"name", "presets"}

    # The preset's env is used without --env; --set changes the preset; the run's config says what was trained.
    run_dir = tmp_path / "run"
    result = invoke(
        "train", "--agent", "echo", "--preset", "quick", "--set", "total_steps=4", "--run-dir", str(run_dir)
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["env_id"] == "OpenSpiel-kuhn_poker-v0"
    assert (saved["config"]["always"], saved["config"]["total_steps"]) == (1, 4)


def test_preset_mistakes_are_one_line_before_a_run_exists(install_plugin, tmp_path: Path, monkeypatch) -> None:
    install_echo_with_presets(install_plugin, tmp_path)
    monkeypatch.chdir(tmp_path)
    line = error_line(invoke("train", "--agent", "echo", "--preset", "quik"))
    assert "unknown preset of echo 'quik'" in line and "'quick'" in line
    line = error_line(invoke("train", "--agent", "echo", "--preset", "needs_demos", "--env", "OpenSpiel-kuhn_poker-v0"))
    assert "no/such/demos.jsonl" in line and "make it first: llm-gym demos --agent random" in line
    line = error_line(invoke("train", "--agent", "random", "--preset", "quick", "--env", "OpenSpiel-kuhn_poker-v0"))
    assert "random ships no presets" in line
    line = error_line(invoke("train", "--resume", str(tmp_path / "somewhere"), "--preset", "quick"))
    assert "drop --preset" in line
    assert not (tmp_path / "runs").exists()


def test_malformed_preset_files_name_the_file(tmp_path: Path) -> None:
    for text, said in [
        ("env = 'x'", "needs a description"),
        ("description = 'd'\nlearning_rate = 1", "unknown key(s) learning_rate"),
        ("description = 'd'\nconfig = 3", "config must be a table"),
        ("description = 'd'\n[before]\ncommand = 'x'", "[before] needs creates"),
        ("description = [", "cannot be read"),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=r"preset file .*bad\.toml") as caught:
            read_preset(path)
        assert said in str(caught.value), (text, caught.value)


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'quick'"):
        get_preset(get_agent("sft"), "quik")
