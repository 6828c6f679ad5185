"""``python -m llm_gym.learning_demo``: run the learning demo (what ``make demo`` runs) and print its table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from llm_gym.cli.common import cli_errors, console
from llm_gym.config import apply_overrides, parse_assignments
from llm_gym.learning_demo.config import LearningDemoConfig
from llm_gym.learning_demo.pipeline import run_learning_demo, save_result
from llm_gym.learning_demo.report import summary_text, write_plot


@cli_errors
def main(
    runs_root: Annotated[Path, typer.Option("--runs-root", help="Parent of the run directory.")] = Path("runs/demo"),
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one LearningDemoConfig field: key=value (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of the table.")] = False,
) -> None:
    """Record demonstrations, fine-tune the model on them, evaluate it before and after on held-out seeds, and
    print a table with 95% intervals and the path of a plot."""
    config = apply_overrides(LearningDemoConfig(), parse_assignments(sets or []))

    def log(line: str) -> None:
        if not as_json:
            console.print(line, markup=False, soft_wrap=True)

    result = run_learning_demo(config, runs_root, log=log)
    result.plot = write_plot(result)
    path = save_result(result)
    if as_json:
        print(json.dumps(result.as_dict()))
    else:
        print(summary_text(result))
        print(f"result: {path}")


def run() -> None:
    typer.run(main)


if __name__ == "__main__":
    run()
