"""What the learning demo shows at its end: a small table (before, after and the reference rows: games won with
the Wilson 95% interval, mean return with its 95% t interval, n, seeds), a verdict on whether the intervals of
before and after overlap, the wall time of each phase, and a PNG of the same intervals."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Column, Table

from llm_gym.learning_demo.agreement import Position, Positions
from llm_gym.learning_demo.pipeline import Arm, LearningDemoResult
from llm_gym.training.curves import pyplot

PLOT_FILE = "learning_demo.png"
_ASIDE = re.compile(r"\s*\([^()]*\)")
POSITION_ROWS = 16
"""Positions listed one per row up to this many (Kuhn poker's learner meets 10 against ``random``); past it, only the
counts are printed."""


def _seeds(seeds: range) -> str:
    return f"{seeds.start}-{seeds.stop - 1}"


def arm_row(arm: Arm) -> list[str]:
    rate, low, high = arm.win_rate()
    mean, half = arm.mean_return()
    return [arm.label, f"{arm.wins}/{arm.n} = {rate:.0%}", f"[{low:.0%}, {high:.0%}]", f"{mean:+.2f} ± {half:.2f}"]


def summary_text(result: LearningDemoResult) -> str:
    """The table and the lines under it, as plain text (what ``make demo`` ends with)."""
    config = result.config
    table = Table(
        "greedy play", "games won", "95% CI (Wilson)", "mean return ± 95% CI",
        title=f"{config.env_id} vs random, {result.after.n} held-out games (seeds {_seeds(config.eval_seeds)})",
    )  # fmt: skip
    for arm in (result.before, result.after):
        table.add_row(*arm_row(arm))
    table.add_section()
    for arm in result.references:
        table.add_row(*arm_row(arm), style="dim")
    lines = [render_table(table, width=110)]
    before, after = result.before.win_rate(), result.after.win_rate()
    if result.learning_shown():
        verdict = f"learning shown: after's interval [{after[1]:.0%}, {after[2]:.0%}] lies above before's"
        verdict += f" [{before[1]:.0%}, {before[2]:.0%}]"
    else:
        verdict = f"no learning shown: after's interval [{after[1]:.0%}, {after[2]:.0%}] does not lie above before's"
        verdict += f" [{before[1]:.0%}, {before[2]:.0%}]"
    lines.append(verdict)
    lines.extend(_agreement_lines(result))
    explored = f"; a random action with probability {config.demo_explore:g} per decision" if config.demo_explore else ""
    lines.append(
        f"trained on {result.demo_decisions} decisions of {config.demonstrator} from {config.demo_episodes} games "
        f"(seeds {_seeds(config.demo_seeds)}, none of them evaluated{explored}); model {config.model}, LoRA on the "
        f"top {config.trainable_layers} layers, {config.epochs} epochs"
    )
    lines += run_lines(result, "llm-gym play --checkpoint ... plays it")
    return "\n".join(lines)


def run_lines(result: Any, checkpoint_hint: str) -> list[str]:
    """A demo report's last lines: the wall time of each phase, the checkpoint (with ``checkpoint_hint``), the plot."""
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in result.phases.items())
    lines = [f"wall time {result.wall_seconds / 60:.1f} min ({phases})"]
    if result.checkpoint:
        lines.append(f"checkpoint: {result.checkpoint}  ({checkpoint_hint})")
    if result.plot:
        lines.append(f"plot: {result.plot}")
    return lines


def render_table(table: Any, width: int) -> str:
    """A rich table as plain text, ``width`` columns wide."""
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    return console.file.getvalue().rstrip()


def position_labels(positions: Positions) -> list[str]:
    """A short name per position: the lines of its observation that are not in every position's (the seat, the
    card and the actions so far, in a card game), without their parenthesised asides, joined by " | "."""
    return [" | ".join(lines) for lines in _differing_lines(positions)]


def position_column(positions: Positions) -> tuple[str, list[str]]:
    """The table's position column: a header and one cell per position, the cells shorter than
    :func:`position_labels` so that a row fits on one line. Where every position has its differing lines in the same
    order, the words each such line starts with in every position ("Your card:") move to the header, once, and the
    cells keep what differs ("K"); otherwise the cells are the full labels."""
    rows = _differing_lines(positions)
    full = "position (the lines that differ)", [" | ".join(lines) for lines in rows]
    if len(rows) < 2 or len({len(lines) for lines in rows}) != 1:
        return full
    prefixes = [_common_words([lines[i] for lines in rows]) for i in range(len(rows[0]))]
    cells = [
        " | ".join(line[len(prefix) :].strip() for line, prefix in zip(lines, prefixes, strict=True)) for lines in rows
    ]
    if len(set(cells)) < len(cells):  # the shortening would merge two positions: keep the full labels
        return full
    return f"position: {' | '.join(f'{prefix} …' if prefix else '…' for prefix in prefixes)}", cells


def _differing_lines(positions: Positions) -> list[list[str]]:
    texts = [[_ASIDE.sub("", line).strip() for line in str(p.observation).splitlines()] for p in positions]
    common = set.intersection(*(set(lines) for lines in texts)) if texts else set()
    return [[line for line in lines if line not in common and line] for lines in texts]


def _common_words(lines: list[str]) -> str:
    """The words every line starts with, up to the last one that ends in ":" (a key such as "Your card:"), leaving
    each line at least one word of its own; "" if they share no such key."""
    words = [line.split(" ") for line in lines]
    n = key = 0
    while all(len(w) > n + 1 for w in words) and len({w[n] for w in words}) == 1:
        n += 1
        key = n if words[0][n - 1].endswith(":") else key
    return " ".join(words[0][:key])


def _agreement_lines(result: LearningDemoResult) -> list[str]:
    positions = result.positions
    if positions is None or not result.agreements:
        return []
    unreached = result.unreached if result.unreached is not None else Positions()
    lines = []
    if len(positions) + len(unreached) <= POSITION_ROWS:
        labels = [a.label.split(":")[0] for a in result.agreements]
        title = f"greedy answer in each position the demonstrator met in the {result.after.n} held-out games"
        if len(unreached):
            title += " (and, met 'never', those only random play reaches: in no demonstration)"
        everything = Positions({**positions.by_key, **unreached.by_key})
        header, cells = position_column(everything)
        # The header wraps rather than widening the column past its longest cell.
        position_header = Column(header, max_width=max([24, *(len(c) for c in cells)]))
        table = Table(position_header, "times met", result.config.demonstrator, *labels, title=title)
        answers = [a.answers + u.answers for a, u in zip(result.agreements, result.unreached_agreements, strict=True)]
        for i, (label, position) in enumerate(zip(cells, everything, strict=True)):
            if i == len(positions):
                table.add_section()
            marked = [_marked(position, row[i]) for row in answers]
            table.add_row(label, str(position.visits) if i < len(positions) else "never", position.name(position.action),
                          *marked)  # fmt: skip
        lines.append(render_table(table, width=150))
    for a in result.agreements:
        line = (
            f"{a.label.split(':')[0]}: the demonstrator's answer in {a.agreed_decisions}/{positions.decisions} of its "
            f"held-out decisions ({a.agreed_positions}/{len(positions)} positions)"
        )
        lines.append(line + _as_good(positions, a.best_decisions, positions.decisions))
    for u in result.unreached_agreements if unreached else ():
        line = (
            f"{u.label.split(':')[0]}, in the {len(unreached)} positions the demonstrator never reaches (in no "
            f"demonstration): its answer in {u.agreed_positions}/{len(unreached)}"
        )
        lines.append(line + _as_good(unreached, u.best_positions, len(unreached)))
    return lines


def _as_good(positions: Positions, best: int, out_of: int) -> str:
    """How often the answer was as good as the demonstrator's by its values, where the positions carry values
    (nothing where none does: only the exact match can be counted then)."""
    return f", an answer as good by its values in {best}/{out_of}" if any(p.values for p in positions) else ""


def _marked(position: Position, answer: int) -> str:
    """The answer's name, marked where it is not the demonstrator's: by the demonstrator's values "as good" (a tie)
    or "worse"; "differs" where it has no values."""
    name = position.name(answer)
    if answer == position.action:
        return name
    if not position.values:
        return f"{name} (differs)"
    return f"{name} (as good)" if position.is_best(answer) else f"{name} (worse)"


def write_plot(result: LearningDemoResult) -> Path:
    """Games won (Wilson 95% intervals) and mean return (95% t intervals) of every row, side by side, as a PNG in
    the run directory; returns its path."""
    plt = pyplot("the learning demo's plot", "lm")
    figure, (wins_axis, return_axis) = plt.subplots(1, 2, figsize=(10, 4))
    arms, colours, labels = plot_games_won(wins_axis, result, "games won (Wilson 95% CI)")
    for i, (arm, colour) in enumerate(zip(arms, colours, strict=True)):
        mean, half = arm.mean_return()
        return_axis.errorbar(i, mean, yerr=half, fmt="o", capsize=6, color=colour)
    return_axis.set_xticks(range(len(arms)), labels, fontsize=8)
    return_axis.set_title("mean return (95% CI)")
    return_axis.grid(axis="y", alpha=0.3)
    config = result.config
    figure.suptitle(
        f"{Path(config.model).name} on {config.env_id}\nbefore and after sft on {config.demonstrator}'s play, "
        f"{result.after.n} held-out games"
    )
    return save_plot(plt, figure, result.run_path / PLOT_FILE)


def plot_games_won(axis: Any, result: Any, title: str) -> tuple[list[Any], list[str], list[str]]:
    """Each row's games won with its Wilson 95% interval on ``axis``: before (red), after (green), the references
    (grey), in the table's order. Returns the rows, their colours and labels, for a second panel over them. Both
    demos (sft's ``LearningDemoResult``, the RL demo's ``RLDemoResult``) draw this panel."""
    arms = [result.before, result.after, *result.references]
    colours = ["tab:red", "tab:green"] + ["tab:gray"] * len(result.references)
    labels = [arm.label.replace(": ", ":\n").replace(" (", "\n(") for arm in arms]
    for i, (arm, colour) in enumerate(zip(arms, colours, strict=True)):
        rate, low, high = arm.win_rate()
        axis.errorbar(i, rate, yerr=[[rate - low], [high - rate]], fmt="o", capsize=6, color=colour)
    axis.set_xticks(range(len(arms)), labels, fontsize=8)
    axis.set_title(title)
    axis.set_ylim(0, 1)
    axis.grid(axis="y", alpha=0.3)
    return arms, colours, labels


def save_plot(plt: Any, figure: Any, path: Path) -> Path:
    """Lay ``figure`` out, write it to ``path`` as a PNG and free it (pyplot keeps every open figure)."""
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
