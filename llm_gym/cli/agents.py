"""``llm-gym agents``: the registered agents, or one agent's presets and config fields.

One agent's page fits an 80-column terminal: its presets, then the fields a user changes first (each with the first
sentence of its doc); ``--all`` shows every field with its whole doc, grouped by what it affects.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from llm_gym.cli.common import cli_errors, console, print_json
from llm_gym.cli.options import JsonOption
from llm_gym.config import config_table, field_effect, first_fields, nested_agent_fields
from llm_gym.plugins import agent_owner, agents, get_agent
from llm_gym.presets import agent_presets

GROUPS = (
    ("play", "How the policy plays"),
    ("training", "Training only (a checkpoint plays the same whatever they say)"),
    ("speed", "Speed only (what is played stays the same)"),
)
"""``--all``: the field groups, by what a field affects (:func:`llm_gym.config.field_effect`)."""


@cli_errors
def agents_command(
    name: Annotated[
        str | None,
        typer.Argument(help="Show this agent's presets and config fields (what --preset and --set take)."),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="With NAME: every config field with its whole doc, grouped.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List agents, or show one agent's presets and settings."""
    if name is not None:
        show_agent(name, show_all, as_json)
        return
    listing = [
        {"name": n, "plugin": agent_owner(n), "learns": c.learns, "presets": list(agent_presets(c)),
         "description": c.description}
        for n, c in sorted(agents().items())
    ]  # fmt: skip
    if as_json:
        print_json(listing)
        return
    table = Table("name", "plugin", "learns", "description", title=f"{len(listing)} agents", box=box.SIMPLE_HEAD)
    table.columns[0].no_wrap = True
    for item in listing:
        table.add_row(item["name"], item["plugin"], "yes" if item["learns"] else "no", item["description"])
    console.print(table)
    console.print("One agent's presets and settings: llm-gym agents NAME", highlight=False)


def show_agent(name: str, show_all: bool, as_json: bool) -> None:
    cls = get_agent(name)
    rows = config_table(cls.Config)
    # what each field affects (llm_gym.config.training_only / speed_only; unmarked: play); a dict holding another
    # agent's settings (nested_agent_config): each key affects what that agent's field of its name affects
    effects = {k: field_effect(cls.Config, k) for k, *_ in rows}
    nested = nested_agent_fields(cls.Config)
    presets = agent_presets(cls)
    first = first_fields(cls.Config)
    if as_json:
        print_json({
            "name": name, "description": cls.description, "learns": cls.learns,
            "presets": [_preset_json(p) for p in presets.values()],
            "first_fields": first,
            "fields": [{"key": k, "type": t, "default": v, "affects": effects[k] if k not in nested
                        else f"per key ({nested[k]}'s fields)", "doc": d} for k, t, v, d in rows],
        })  # fmt: skip
        return
    console.print(f"[bold]{name}[/bold]: {cls.description}", highlight=False)
    if presets:
        table = Table("preset", "what it runs", title=f"presets: llm-gym train --agent {name} --preset NAME",
                      title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
        table.columns[0].no_wrap = True
        for preset in presets.values():
            table.add_row(preset.name, f"{preset.description} (env: {preset.env or 'any, give --env'})")
        console.print(table)
        # A command to copy: whole words, continued with a backslash as a shell reads it.
        for preset in presets.values():
            if preset.command:
                console.print(f"{preset.name} trains on {preset.creates}; make it first with:", highlight=False)
                console.print(shell_lines(preset.command, console.width), soft_wrap=True, highlight=False, markup=False)
                console.print()
    by_key = {key: (kind, default, doc) for key, kind, default, doc in rows}
    if not show_all:
        table = _table("setting", "default", "what it does", title=f"settings: --set KEY=VALUE ({len(first)} of "
                       f"{len(rows)}; every one: llm-gym agents {name} --all)")  # fmt: skip
        for key in first:
            kind, default, doc = by_key[key]
            table.add_row(key, _shown(default), first_sentence(doc) + _choices(kind))
        console.print(table)
        return
    for effect, title in GROUPS:
        keys = [k for k, *_ in rows if effects[k] == effect and k not in nested]
        if effect == "training":
            keys += list(nested)  # their keys follow the nested agent's own markers
        if not keys:
            continue
        table = _table("setting", "default", "what it does", title=f"{title}: {len(keys)}")
        for key in keys:
            kind, default, doc = by_key[key]
            table.add_row(key, _shown(default), " ".join(doc.split()) + _choices(kind))
        console.print(table)


def shell_lines(command: str, width: int) -> str:
    """``command`` as shell lines of at most ``width`` columns (where its words allow), continued with `` \\``."""
    lines, line = [], "  "
    for word in command.split():
        if line.strip() and len(line) + len(word) + 3 > width:
            lines.append(line + " \\")
            line = "    "
        line += ("" if not line.strip() else " ") + word
    return "\n".join([*lines, line])


def _table(*columns: str, title: str) -> Table:
    """A borderless table whose first column (a name to copy) never wraps and whose last takes the room left."""
    table = Table(*columns, title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    table.columns[0].no_wrap = True
    if len(columns) == 3:
        table.columns[1].overflow = "fold"
        table.columns[1].max_width = 22
    table.columns[-1].ratio = 1
    return table


def first_sentence(doc: str) -> str:
    """The doc's first sentence (up to the first full stop that ends one), or the whole doc."""
    flat = " ".join(doc.split())
    match = re.search(r"(?<![.\s]\w)\.(\s|$)", flat)  # not the stops inside "e.g." and "i.e."
    return flat[: match.end()].strip() if match else flat


def _shown(default: str) -> str:
    """A default as ``--set`` takes it: a string without its quotes."""
    if len(default) >= 2 and default[0] == default[-1] and default[0] in "'\"":
        return default[1:-1]
    return default


def _choices(kind: str) -> str:
    """For a Literal type, its choices (the doc usually names them; the type is the authority)."""
    if not kind.startswith("Literal["):
        return ""
    values = re.findall(r"'([^']*)'", kind)
    return f" [{' | '.join(values)}]" if values else ""


def _preset_json(preset: Any) -> dict[str, Any]:
    return {"name": preset.name, "description": preset.description, "env": preset.env,
            "env_args": dict(preset.env_args), "config": dict(preset.config),
            "before": {"creates": preset.creates, "command": preset.command} if preset.command else None,
            "file": str(preset.source) if preset.source else None}  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("agents")(agents_command)
