"""Choose one of several trained runs on validation seeds, then measure only the chosen one on test seeds.

When a recipe learns for some training seeds and not others, the usual remedy is to train several and keep the
best. Keeping the best by the score that is then reported overstates it (the maximum of noisy estimates is biased
upwards), so selection here has two disjoint sets of evaluation seeds: every candidate plays the same validation
games, the one with the highest mean return (or median, ``by="median"``) is chosen, and the chosen one plays the
test games, whose score is the one to report. ``test_all`` also plays every other candidate on the test games, which
shows how much the choice gained over a training seed picked blindly and how far the validation score of the winner
overstated its test score.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.errors import CheckpointError, ConfigError
from llm_gym.plugins import get_agent
from llm_gym.runs import CONFIG_FILE, Run
from llm_gym.stats import mean_ci95
from llm_gym.training.curves import expand_runs

CRITERIA = ("mean", "median")
"""How the validation games rank the candidates. The median is not moved by one outlying game: a Breakout game whose
ball gets above the bricks can score 281 where the same policy's other games score 7-11."""

LATEST = "latest"
"""``checkpoint_name`` for each run's newest checkpoint that verifies (what ``llm-gym play --checkpoint RUN`` plays)."""


@dataclass(frozen=True)
class SeedBlock:
    """Episodes ``first``, ``first + 1``, ... ``first + episodes - 1``: episode ``i`` resets with seed ``first + i``."""

    first: int
    episodes: int

    @property
    def last(self) -> int:
        return self.first + self.episodes - 1

    def overlaps(self, other: SeedBlock) -> bool:
        return self.first <= other.last and other.first <= self.last

    def __str__(self) -> str:
        return f"seeds {self.first}-{self.last}"


@dataclass(frozen=True)
class Candidate:
    """One policy to choose from: a run's checkpoint (None for a run of an agent that learns nothing)."""

    label: str
    run: Path
    checkpoint: Path | None

    @property
    def played(self) -> Path:
        """What ``load_policy`` is given: the checkpoint, or the run itself where there is none."""
        return self.checkpoint or self.run


@dataclass
class Evaluation:
    """One candidate's games on one block of seeds."""

    returns: list[float]

    @property
    def mean(self) -> float:
        return mean_ci95(self.returns)[0]

    @property
    def ci95(self) -> float:
        return mean_ci95(self.returns)[1]

    @property
    def median(self) -> float:
        return float(statistics.median(self.returns))

    def as_dict(self) -> dict[str, Any]:
        return {"mean_return": self.mean, "ci95": self.ci95, "median_return": self.median, "returns": self.returns}


@dataclass
class Selection:
    """Every candidate's validation games, which one was chosen, and the test games played."""

    candidates: list[Candidate]
    validation: SeedBlock
    test: SeedBlock
    validation_results: list[Evaluation]
    chosen: int
    test_results: dict[int, Evaluation] = field(default_factory=dict)
    """Candidate index -> its test games: the chosen one always, every candidate with ``test_all``."""
    chosen_by: str = "mean"
    """Which of ``CRITERIA`` ranked the validation games."""

    @property
    def chosen_candidate(self) -> Candidate:
        return self.candidates[self.chosen]

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for i, candidate in enumerate(self.candidates):
            test = self.test_results.get(i)
            rows.append(
                {
                    "label": candidate.label,
                    "run": str(candidate.run),
                    "checkpoint": str(candidate.checkpoint) if candidate.checkpoint else None,
                    "chosen": i == self.chosen,
                    "validation": self.validation_results[i].as_dict(),
                    "test": test.as_dict() if test else None,
                }
            )
        return {
            "validation_seeds": [self.validation.first, self.validation.last],
            "test_seeds": [self.test.first, self.test.last],
            "chosen": self.chosen_candidate.label,
            "chosen_by": self.chosen_by,
            "chosen_test": self.test_results[self.chosen].as_dict(),
            "candidates": rows,
        }


def check_by(by: str) -> None:
    if by not in CRITERIA:
        raise ConfigError(f"--by takes {' or '.join(CRITERIA)}, got {by!r}")


def check_seed_blocks(validation: SeedBlock, test: SeedBlock) -> None:
    """Validation and test games must be different games, or the test score is the biased one again."""
    if validation.overlaps(test):
        raise ConfigError(
            f"validation {validation} and test {test} overlap; the chosen run's test score is only unbiased on games "
            f"the choice never saw: move --test-seed past {validation.last} (or below {validation.first - test.episodes + 1})"
        )


def find_candidates(paths: Sequence[Path], checkpoint_name: str = LATEST) -> list[Candidate]:
    """The candidates the paths stand for: a checkpoint directory as itself, a run directory as its checkpoint
    ``checkpoint_name`` (``latest``: the newest that verifies), a directory of runs (a sweep's) as each run in it.
    A run without that checkpoint is refused in one line naming the ones it has."""
    if not paths:
        raise ConfigError("select needs at least two runs (run directories, checkpoints or a sweep's directory)")
    found: list[tuple[Path, Path | None]] = []  # (run, checkpoint) of each candidate
    for path in paths:
        if path.is_dir() and not (path / CONFIG_FILE).is_file() and path.parent.name == "checkpoints":
            run, checkpoint = Run.resolve_checkpoint(path)  # verified, or refused naming what is wrong
            found.append((run.path, checkpoint))
            continue
        found += [_run_candidate(run_dir, checkpoint_name) for run_dir in expand_runs([path])]
    labels = _short_labels([run for run, _ in found])
    candidates = [
        Candidate(label + (f"@{checkpoint.name}" if checkpoint else ""), run, checkpoint)
        for label, (run, checkpoint) in zip(labels, found, strict=True)
    ]
    seen: set[Path] = set()
    for candidate in candidates:
        if candidate.played.resolve() in seen:
            raise ConfigError(f"{candidate.played} is given twice; give each run or checkpoint once")
        seen.add(candidate.played.resolve())
    if len(candidates) < 2:
        raise ConfigError(f"select needs at least two candidates to choose from, got {len(candidates)}: {paths[0]}")
    return candidates


def _run_candidate(run_dir: Path, checkpoint_name: str) -> tuple[Path, Path | None]:
    """A run's checkpoint ``checkpoint_name`` (``latest``: the newest that verifies); none for a run of an agent
    that learns nothing (its config is the policy)."""
    run = Run.open(run_dir)
    learns = get_agent(run.read_config()["agent"]).learns
    if checkpoint_name == LATEST or not learns:
        return run.path, Run.resolve_checkpoint(run_dir, required=learns)[1]
    checkpoint = run.checkpoints_dir / checkpoint_name
    if not checkpoint.is_dir():
        have = sorted(p.name for p in run.checkpoints_dir.iterdir() if not p.name.startswith("."))
        raise CheckpointError(
            f"{run_dir} has no checkpoint {checkpoint_name!r} (it has {', '.join(have) or 'none'}); "
            f"use --checkpoint-name {LATEST} for each run's newest"
        )
    return run.path, Run.resolve_checkpoint(checkpoint)[1]


def _short_labels(paths: Sequence[Path]) -> list[str]:
    """Each path relative to the deepest folder all of them share (a sweep's runs as ``cell__seed_N``); a
    candidate's label adds ``@`` and its checkpoint's name (``default__seed_0@step_301056``)."""
    resolved = [p.resolve() for p in paths]
    parts = [p.parts for p in resolved]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    return [str(Path(*p[common:])) for p in parts]


Player = Callable[[Candidate, SeedBlock], list[float]]
"""Plays a candidate's policy greedily on a block of seeds and returns each game's return."""


def select(
    candidates: Sequence[Candidate],
    validation: SeedBlock,
    test: SeedBlock,
    play: Player,
    *,
    test_all: bool = False,
    on_result: Callable[[str, Candidate, Evaluation], None] | None = None,
    by: str = "mean",
) -> Selection:
    """Play every candidate on ``validation``, choose the highest mean (or median, ``by``) return, the first given
    on a tie, and play the chosen one (every candidate with ``test_all``) on ``test``."""
    check_by(by)
    check_seed_blocks(validation, test)
    validation_results = []
    for candidate in candidates:
        result = Evaluation(play(candidate, validation))
        validation_results.append(result)
        if on_result:
            on_result("validation", candidate, result)
    scores = [getattr(r, by) for r in validation_results]
    chosen = scores.index(max(scores))
    selection = Selection(list(candidates), validation, test, validation_results, chosen, chosen_by=by)
    order = [chosen] + ([i for i in range(len(candidates)) if i != chosen] if test_all else [])
    for i in order:
        result = Evaluation(play(candidates[i], test))
        selection.test_results[i] = result
        if on_result:
            on_result("test", candidates[i], result)
    return selection
