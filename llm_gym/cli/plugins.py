"""``llm-gym plugins``: which plugins loaded, from which distribution, and what failed."""

from __future__ import annotations

import typer
from rich.table import Table

from llm_gym.cli.common import cli_errors, console, print_json
from llm_gym.cli.options import JsonOption
from llm_gym.plugins import agent_registry, backend_registry, plugin_failures, plugins


@cli_errors
def plugins_command(as_json: JsonOption = False) -> None:
    """List plugins (entry points of the llm_gym group) and any that failed to load."""
    agent_owners, backend_owners = agent_registry().owners, backend_registry().owners
    listing = [
        {
            "name": p.name,
            "distribution": p.distribution,
            "module": p.value,
            "loaded": p.loaded,
            "error": p.error,
            "agents": sorted(a for a, owner in agent_owners.items() if owner == p.name),
            "backends": sorted(b for b, owner in backend_owners.items() if owner == p.name),
        }
        for p in plugins()
    ]
    failures = plugin_failures()
    if as_json:
        print_json({"plugins": listing, "failures": failures})
        return
    table = Table("plugin", "distribution", "module", "status", "provides", title="llm_gym plugins")
    for item in listing:
        provides = ", ".join([*item["agents"], *(f"backend:{b}" for b in item["backends"])])
        status = "[green]loaded[/]" if item["loaded"] else "[red]failed[/]"
        table.add_row(item["name"], item["distribution"], item["module"], status, provides)
    console.print(table)
    for line in failures:
        console.print(f"[red]failed:[/] {line}", markup=True, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("plugins")(plugins_command)
