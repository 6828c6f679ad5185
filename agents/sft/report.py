"""What an sft run shows at its end: the greedy evaluations before and after training as a small table (mean score
with a 95% CI, the share of episodes with full score -- a win, an exact answer -- and of score 0, each with its
Wilson interval), and a plot of both over training, written into the run directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from llm_gym.runs import Run
from llm_gym.stats import mean_ci95, wilson_ci95
from llm_gym.training.curves import pyplot

PLOT_FILE = "sft_evaluation.png"


@dataclass
class EvaluationRecord:
    """One greedy evaluation: after ``examples_seen`` demo decisions (``epoch`` epochs)."""

    examples_seen: int
    epoch: int
    returns: list[float]
    scores: list[float]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationRecord:
        return cls(int(data["examples_seen"]), int(data["epoch"]), list(data["returns"]), list(data["scores"]))

    def count(self, score: float) -> int:
        return sum(1 for s in self.scores if abs(s - score) < 1e-9)

    def rate(self, score: float) -> tuple[float, float, float]:
        """(share of episodes with this score, Wilson 95% low, high)."""
        n, k = len(self.scores), self.count(score)
        low, high = wilson_ci95(k, n)
        return k / max(n, 1), low, high


def _row(label: str, record: EvaluationRecord) -> list[str]:
    mean_return, return_ci = mean_ci95(record.returns)
    mean, ci = mean_ci95(record.scores)
    cells = [label, str(len(record.scores)), f"{mean_return:.2f} ± {return_ci:.2f}", f"{mean:.2f} ± {ci:.2f}"]
    for score in (1.0, 0.0):
        share, low, high = record.rate(score)
        cells.append(f"{share:.0%} [{100 * low:.0f}-{100 * high:.0f}]")
    return cells


def row_label(record: EvaluationRecord, final: bool) -> str:
    """The row name: "before training" for the untrained model's evaluation (``eval_at_start``), else after which epoch: a run that
    skipped the evaluation at the start has no "before" row, and its first evaluation must not be called one."""
    if record.examples_seen == 0:
        return "before training"
    return f"after (epoch {record.epoch})" if final else f"epoch {record.epoch}"


def print_report(summary: Mapping[str, Any], evaluations: Sequence[EvaluationRecord]) -> None:
    """The before/after table, the validation loss, the checkpoint and the plot's path."""
    console = Console()
    if evaluations:
        table = Table(
            "greedy play", "n", "mean return", "mean score", "score 1 (win)", "score 0",
            title=f"sft on {summary['env_id']}: held-out seeds, 95% intervals", box=box.SIMPLE_HEAD,
            pad_edge=False, collapse_padding=True,
        )  # fmt: skip
        table.columns[0].no_wrap = True
        first, last = evaluations[0], evaluations[-1]
        if last is not first:
            table.add_row(*_row(row_label(first, final=False), first))
        table.add_row(*_row(row_label(last, final=True), last))
        console.print(table)
    validation = summary.get("validation") or {}
    if "val/answer_loss" in validation:
        console.print(
            f"validation demos: answer loss {validation['val/answer_loss']:.3f}, "
            f"mean probability of the demo answer {validation['val/answer_prob']:.2f}"
        )
    console.print(f"checkpoint: {summary['checkpoint']}", soft_wrap=True)  # a path to copy: never broken
    if summary.get("plot"):
        console.print(f"plot: {summary['plot']}", soft_wrap=True)


def write_plot(run: Run, evaluations: Sequence[EvaluationRecord]) -> Path:
    """Share of full-score and zero-score episodes per evaluation, with Wilson intervals, over demo decisions seen."""
    plt = pyplot("the sft agent's plot", "lm")
    figure, axis = plt.subplots(figsize=(6, 3.5))
    x = [e.examples_seen for e in evaluations]
    for score, label, colour in (
        (1.0, "score 1 (win / exact)", "tab:green"),
        (0.0, "score 0 (loss / miss)", "tab:red"),
    ):
        rates = [e.rate(score) for e in evaluations]
        mid = [r[0] for r in rates]
        errors = [[r[0] - r[1] for r in rates], [r[2] - r[0] for r in rates]]
        axis.errorbar(x, mid, yerr=errors, marker="o", capsize=4, label=label, color=colour)
    axis.set_xlabel("demo decisions trained on")
    axis.set_ylabel("share of evaluation episodes")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"greedy evaluation, {len(evaluations[-1].scores)} held-out episodes, Wilson 95% CI")
    axis.legend(loc="best")
    figure.tight_layout()
    path = run.path / PLOT_FILE
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
