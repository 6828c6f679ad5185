"""``llm-gym envs``: every registered env id."""

from __future__ import annotations

import gymnasium as gym
import typer
from rich import box
from rich.table import Table

from llm_gym.cli.common import cli_errors, console, print_json
from llm_gym.cli.options import JsonOption
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
    console.print(env_table(rows, console.width))


NARROW = 64
"""Below this many columns the listing drops its arguments column rather than cut an id."""


def env_table(rows: list[dict[str, object]], width: int) -> Table:
    """The listing: ids whole (never wrapped or cut: they are what a user copies), family, what the policy sees,
    and the ``gym.make`` arguments besides the game the id names (dropped on a terminal narrower than
    :data:`NARROW`)."""
    wide = width >= NARROW
    table = Table("id", "family", "observation", *(["arguments"] if wide else []), title=f"{len(rows)} envs",
                  box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    table.columns[0].no_wrap = True
    table.columns[0].min_width = max((len(str(r["id"])) for r in rows), default=2)
    for row in rows:
        kwargs = dict(row["kwargs"])  # type: ignore[call-overload]
        kwargs.pop("game", None)  # the id names it
        arguments = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        if row["id"] == "OpenSpiel-v0":
            arguments = arguments or "any game, by task id"
        table.add_row(str(row["id"]), str(row["family"]), _observation(str(row["entry_point"])),
                      *([arguments] if wide else []))  # fmt: skip
    if wide:
        table.columns[-1].overflow = "fold"
    return table


def _observation(entry_point: str) -> str:
    """What a policy sees, from the env class: ascii (a character grid), vision (an image and text) or text."""
    name = entry_point.rsplit(":", 1)[-1].lower()
    return next((mode for mode in ("ascii", "vision") if mode in name), "text")


def register(app: typer.Typer) -> None:
    app.command("envs")(envs)
