"""``llm-gym play --exact``: a policy's exact evaluation on a small OpenSpiel game (:mod:`llm_gym.training.exact`), as a table
or JSON, with a progress line while the policy is asked about each position."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from llm_gym.agent import EnvConfig, Policy
from llm_gym.training.exact import ExactResult, check_exact_env, evaluate_exact

__all__ = ["check_exact_env", "exact_report", "play_exact", "print_exact"]


def play_exact(policy: Policy, env: EnvConfig, *, greedy: bool, quiet: bool, console: Console) -> ExactResult:
    """Evaluate exactly, with a progress bar of positions asked (none when ``quiet``)."""
    with Progress(
        TextColumn("exact evaluation"), BarColumn(), MofNCompleteColumn(), TextColumn("positions"),
        TimeElapsedColumn(), console=console, disable=quiet, transient=True,
    ) as progress:  # fmt: skip
        task = progress.add_task("positions", total=None)

        def on_batch(asked: int, left: int) -> None:
            progress.update(task, completed=asked, total=asked + left)

        return evaluate_exact(policy, env, greedy=greedy, on_batch=on_batch)


def exact_report(result: ExactResult, agent: str) -> dict[str, Any]:
    """The JSON report: every number of the result."""
    return {"agent": agent, **result.as_dict()}


def print_exact(result: ExactResult, agent: str, console: Console) -> None:
    how = "greedy" if result.greedy else "its probabilities"
    table = Table("seat", "share", "expected return", "win", "draw", "loss", "worst vs adversary",
                  title=f"{agent} on {result.env_id}: exact, {how}, against the uniformly random opponent")  # fmt: skip
    for seat in result.seats:
        worst = "-" if seat.worst_return is None else f"{seat.worst_return:g}"
        table.add_row(str(seat.seat), f"{seat.probability:.2f}", f"{seat.expected_return:.4f}", f"{seat.win:.4f}",
                      f"{seat.draw:.4f}", f"{seat.loss:.4f}", worst)  # fmt: skip
    worst = "-" if result.worst_return is None else f"{result.worst_return:g}"
    table.add_row("all", "1.00", f"{result.expected_return:.4f}", f"{result.win:.4f}", f"{result.draw:.4f}",
                  f"{result.loss:.4f}", worst, style="bold")  # fmt: skip
    console.print(table)
    if result.best_response_return is not None:
        share = result.expected_return / result.best_response_return if result.best_response_return else float("nan")
        console.print(
            f"best response to random: {result.best_response_return:.4f} (this policy: {share:.2f}x); "
            f"exploitability {result.exploitability:.4f}, NashConv {result.nash_conv:.4f}"
        )
    console.print(f"{result.positions} positions asked, {result.seconds:.1f} s")
