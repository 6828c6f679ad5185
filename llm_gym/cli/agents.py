"""``llm-gym agents``: the registered agents, or one agent's config fields."""

from __future__ import annotations

import typer
from rich.table import Table

from llm_gym.cli.common import JsonOption, cli_errors, console, print_json
from llm_gym.config import config_table, field_effect, nested_agent_fields
from llm_gym.plugins import agent_owner, agents, get_agent


@cli_errors
def agents_command(
    name: str = typer.Argument(
        None, help="Show this agent's config fields (what --set takes) and what each affects: play, training, speed."
    ),
    as_json: JsonOption = False,
) -> None:
    """List agents, or show the config of one."""
    if name is not None:
        cls = get_agent(name)
        rows = config_table(cls.Config)
        # what each field affects (llm_gym.config.training_only / speed_only; unmarked: play); a dict holding another
        # agent's settings (nested_agent_config): each key affects what that agent's field of its name affects
        effects = {k: field_effect(cls.Config, k) for k, *_ in rows}
        effects.update({k: f"per key ({agent}'s fields)" for k, agent in nested_agent_fields(cls.Config).items()})
        if as_json:
            print_json([{"key": k, "type": t, "default": v, "affects": effects[k], "doc": d} for k, t, v, d in rows])
            return
        table = Table("key", "type", "default", "affects", "doc", title=f"{name}: {cls.description}")
        for key, kind, default, doc in rows:
            table.add_row(key, kind, default, effects[key], doc)
        console.print(table)
        return
    listing = [
        {"name": n, "plugin": agent_owner(n), "learns": c.learns, "description": c.description}
        for n, c in sorted(agents().items())
    ]
    if as_json:
        print_json(listing)
        return
    table = Table("name", "plugin", "learns", "description", title=f"{len(listing)} agents")
    for item in listing:
        table.add_row(item["name"], item["plugin"], "yes" if item["learns"] else "no", item["description"])
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("agents")(agents_command)
