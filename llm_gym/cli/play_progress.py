"""``llm-gym play``'s progress bar: episodes done of all, decisions per second, elapsed time and the time left.

It draws on stderr, only where stderr is a terminal and never under ``--json``, so piped output and JSON stay
clean. It fits 80 columns: the counts come first, and the bar is the part that shrinks.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from llm_gym.training.evaluation import EpisodeResult, Stopwatch


class PlayProgress:
    """A context manager whose :meth:`step` and :meth:`episode` are ``run_episodes``'s ``on_step``/``on_episode``."""

    def __init__(self, episodes: int, console: Console, *, quiet: bool) -> None:
        self.enabled = not quiet and console.is_terminal
        self.decisions = 0
        self.clock = Stopwatch()
        self.progress = Progress(
            TextColumn("[bold]play"),
            MofNCompleteColumn(),
            TextColumn("episodes"),
            BarColumn(bar_width=None),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=not self.enabled,
            transient=True,
            expand=False,
        )
        self.task = self.progress.add_task("play", total=episodes, rate="")

    def __enter__(self) -> PlayProgress:
        self.clock = Stopwatch()
        self.progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.progress.__exit__(kind, error, traceback)

    def step(self, decisions: int) -> None:
        self.decisions += decisions
        self.progress.update(self.task, rate=f"{format_rate(self.clock.rate(self.decisions))} steps/s")

    def episode(self, result: EpisodeResult) -> None:
        self.progress.advance(self.task)


def format_rate(rate: float) -> str:
    """A rate with three significant digits and no exponent: 0.312, 4.21, 57.3, 1204."""
    if rate >= 100:
        return f"{rate:,.0f}"
    if rate >= 10:
        return f"{rate:.1f}"
    if rate >= 1:
        return f"{rate:.2f}"
    return f"{rate:.3f}"
