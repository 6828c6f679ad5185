"""``llm-gym plot``: learning curves of runs (PNG) from their TensorBoard scalars."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_gym.cli.common import cli_errors, console
from llm_gym.errors import ConfigError
from llm_gym.training.curves import expand_runs
from llm_gym.training.curves import plot as draw


@cli_errors
def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run directories, or directories of runs (a sweep's).")],
    metrics: Annotated[
        list[str] | None,
        typer.Option("--metric", help="TensorBoard scalar to draw, one panel each (repeatable)."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="The PNG to write.")] = Path("curves.png"),
    smoothing: Annotated[int, typer.Option("--smooth", help="Moving average over this many points.")] = 1,
    title: Annotated[str | None, typer.Option("--title", help="Title above the panels.")] = None,
) -> None:
    """Plot learning curves of RUNS: runs that differ only in their seed are drawn as their mean with a 95% CI
    band, labelled by the config fields that tell them apart."""
    if smoothing < 1:
        raise ConfigError(f"--smooth must be >= 1, got {smoothing}")
    if out.suffix.lower() != ".png":
        raise ConfigError(f"--out must name a .png file, got {str(out)!r}")
    found = expand_runs(runs)
    drawn = draw(found, metrics or ["charts/episodic_return"], out, smoothing, title)
    shown = ", ".join(f"{metric}: {n} curve(s)" for metric, n in drawn.items())
    console.print(f"{out} ({len(found)} runs; {shown})", markup=False)


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
