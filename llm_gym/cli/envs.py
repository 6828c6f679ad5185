"""``llm-gym envs``: every registered env id."""

from __future__ import annotations

import gymnasium as gym
import typer
from rich.table import Table

from llm_gym.cli.common import JsonOption, cli_errors, console, print_json
from llm_gym.envs.catalog import env_family, env_ids
from llm_gym.errors import UnknownNameError


def _rows() -> list[dict[str, object]]:
    rows = []
    for env_id in env_ids():
        spec = gym.registry[env_id]
        entry = str(spec.entry_point)
        rows.append({"id": env_id, "family": env_family(env_id), "entry_point": entry, "kwargs": dict(spec.kwargs)})
    return rows


@cli_errors
def envs(
    family: str = typer.Option(None, "--family", "-f", help="Only this family: atari, openspiel or trace."),
    as_json: JsonOption = False,
) -> None:
    """List the env ids llm-gym registers."""
    all_rows = _rows()
    families = sorted({str(r["family"]) for r in all_rows})
    if family is not None and family not in families:
        raise UnknownNameError("env family", family, families)
    rows = [r for r in all_rows if family is None or r["family"] == family]
    if as_json:
        print_json(rows)
        return
    table = Table("id", "family", "class", "kwargs", title=f"{len(rows)} envs")
    for row in rows:
        kwargs = ", ".join(f"{k}={v}" for k, v in row["kwargs"].items())
        table.add_row(str(row["id"]), str(row["family"]), str(row["entry_point"]).rsplit(":", 1)[-1], kwargs)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("envs")(envs)
