"""Every listing fits an 80-column terminal: ids and setting names are never cut, help screens show no value type
beside a flag, and a training progress bar keeps its step count and times whole."""

from __future__ import annotations

import dataclasses
import io
import re

import gymnasium as gym
import pytest
from rich.cells import cell_len
from rich.console import Console

from llm_gym.cli import build_app
from llm_gym.config import first_fields
from llm_gym.plugins import agents, get_agent
from llm_gym.testing import invoke
from llm_gym.training import loop as training

WIDTH = "80"


def render(*args: str) -> list[str]:
    result = invoke(*args, COLUMNS=WIDTH)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    widest = max(lines, key=cell_len)
    assert cell_len(widest) <= 80, widest
    return lines


def test_envs_shows_every_id_whole() -> None:
    lines = render("envs")
    firsts = {line.split()[0] for line in lines if line.strip()}
    assert {env_id for env_id in gym.registry if env_id.startswith(("LLM", "OpenSpiel", "Trace"))} <= firsts


def test_agents_listing_shows_every_name_whole() -> None:
    firsts = {line.split()[0] for line in render("agents") if line.strip()}
    assert set(agents()) <= firsts


@pytest.mark.parametrize("name", ["ppo_lora", "sft", "nanogpt_ppo", "reflection", "curriculum", "lm", "random"])
def test_one_agents_page_is_compact_and_every_setting_name_whole(name: str) -> None:
    lines = render("agents", name)
    assert len(lines) <= 60, len(lines)  # the fields a user changes first, not all of them (959 lines for ppo_lora)
    firsts = [line.split()[0] for line in lines if line.strip()]
    assert all(key in firsts for key in first_fields(get_agent(name).Config))
    every = render("agents", name, "--all")
    keys = {line.split()[0] for line in every if line.strip()}
    assert {field.name for field in dataclasses.fields(get_agent(name).Config)} <= keys


def test_help_screens_show_no_type_beside_a_flag() -> None:
    commands = sorted(command.name for command in build_app().registered_commands if command.name)
    for command in ["", *commands]:
        lines = render(*([command] if command else []), "--help")
        text = "\n".join(lines)
        assert "<bool>" not in text, command
        assert re.search(r"--help\s+Show this message", text), command  # the flag, then straight its help


def test_a_training_progress_bar_keeps_its_count_at_80_columns() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    bar = training.progress_bar(True, console=console)
    bar.add_task("ppo_lora OpenSpiel-tic_tac_toe-v0", total=20_000, completed=12_288, status="eval 0.53 (best 0.61)")
    console.print(bar.make_tasks_table(bar.tasks))
    (line,) = out.getvalue().splitlines()
    assert cell_len(line) <= 80 and "12288/20000 env steps" in line, line
    assert re.search(r"\d:\d\d:\d\d -:--:--", line), line  # elapsed and remaining, whole
