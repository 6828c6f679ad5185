"""``python -m llm_gym.learning_demo``: run a learning demo and print its table: the RL demo (what ``make demo``
runs) or, with ``--method sft``, the demonstration demo (``make demo-sft``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from llm_gym.commands import cli_errors, console, hide_flag_types
from llm_gym.config import apply_overrides, parse_assignments
from llm_gym.errors import ConfigError
from llm_gym.learning_demo.config import LearningDemoConfig
from llm_gym.learning_demo.pipeline import run_learning_demo, save_result
from llm_gym.learning_demo.report import summary_text, write_plot
from llm_gym.learning_demo.rl import RLDemoConfig, run_rl_demo, save_rl_result
from llm_gym.learning_demo.rl_report import rl_summary_text, write_rl_plot


@cli_errors
def main(
    method: Annotated[
        str,
        typer.Option(
            "--method", help="rl: ppo_lora from no demonstrations (make demo); sft: from a best response's games."
        ),
    ] = "rl",
    runs_root: Annotated[Path, typer.Option("--runs-root", help="Parent of the run directory.")] = Path("runs/demo"),
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one field of the demo's config (RLDemoConfig or LearningDemoConfig)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of the table.")] = False,
) -> None:
    """Train the default model on Kuhn poker, evaluate it before and after on held-out games (and exactly, for the
    RL demo), and print a table with 95% intervals and the path of a plot."""
    if method not in ("rl", "sft"):
        raise ConfigError(f"--method is rl or sft, got {method!r}")

    def log(line: str) -> None:
        if not as_json:
            console.print(line, markup=False, soft_wrap=True)

    if method == "rl":
        result = run_rl_demo(apply_overrides(RLDemoConfig(), parse_assignments(sets or [])), runs_root, log=log)
        result.plot = write_rl_plot(result)
        path, text = save_rl_result(result), rl_summary_text
    else:
        result = run_learning_demo(
            apply_overrides(LearningDemoConfig(), parse_assignments(sets or [])), runs_root, log=log
        )
        result.plot = write_plot(result)
        path, text = save_result(result), summary_text
    if as_json:
        print(json.dumps(result.as_dict()))
    else:
        print(text(result))
        print(f"result: {path}")


def run() -> None:
    hide_flag_types()  # the help screen reads as the CLI's
    typer.run(main)


if __name__ == "__main__":
    run()
