"""``llm-gym copy-policy``: a play-only copy of a checkpoint (no optimiser or RNG state), to move it between machines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_gym.cli.common import cli_errors, console
from llm_gym.training.policy_copy import copy_policy


@cli_errors
def copy_policy_command(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A run directory (its newest checkpoint that verifies) or one of its checkpoints/<name>."),
    ],
    dest: Annotated[Path, typer.Argument(help="A new run directory to write the copy into.")],
) -> None:
    """Copy one checkpoint and its run's config, summary and scalars into a new run directory without the training
    state only --resume reads (it plays, benches and warm-starts like the original; it cannot be resumed)."""
    copied = copy_policy(checkpoint, dest)
    size = sum(p.stat().st_size for p in copied.rglob("*") if p.is_file())
    console.print(f"{copied} ({size / 1e6:.1f} MB): play it with llm-gym play --checkpoint {dest}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("copy-policy")(copy_policy_command)
