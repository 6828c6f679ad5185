"""The leaderboard's ranking rule: entries are ranked against each other only on envs every one of them played.

An aggregate over different sets of games says nothing about who plays better (an entry that played one easy game
would rank above one that played eight hard ones). So, per family (Atari, OpenSpiel, Trace), every distinct set of
held-out envs that some entry played defines a *comparison*: the entries that played at least those envs, each
scored on exactly those envs (IQM of normalised scores with a stratified bootstrap 95% CI over games), ranked by the
lower bound of that CI. Where two or more entries played every held-out env of the suite, a suite-wide comparison
comes first. An entry with nobody to compare with stays unranked. The per-env tables still show every entry on each
env.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from llm_gym.bench.stats import Estimate, stratified_bootstrap_iqm
from llm_gym.bench.store import EpisodeRow

SUITE = "suite"
"""The scope of the suite-wide comparison (the others are named by their family)."""


@dataclass(frozen=True)
class Standing:
    """One entry in one comparison."""

    entry: str
    iqm: Estimate
    """IQM of the normalised scores of its held-out episodes on the comparison's envs, with its 95% CI."""
    games: int
    own: bool
    """True where the comparison's envs are all the envs of this scope the entry played (False: it played more,
    which are left out here)."""


@dataclass(frozen=True)
class Comparison:
    """Entries that played the same envs, ranked on those envs."""

    scope: str
    """A family (``atari``, ``openspiel``, ``trace``) or :data:`SUITE`."""
    labels: tuple[str, ...]
    """The env labels every entry here played (held-out split)."""
    standings: tuple[Standing, ...]
    """Best lower bound first."""
    scope_size: int
    """How many held-out envs the scope has (the family's, or the suite's)."""

    @property
    def ranked(self) -> bool:
        """Whether there is a ranking at all (two or more entries)."""
        return len(self.standings) >= 2

    def describe(self, names: Mapping[str, str], most: int = 3) -> str:
        """``Atari: all 12 envs`` or ``Atari: 2 of 12 envs (breakout-ascii, breakout-fire-ascii)``; ``names`` gives
        a scope's display name."""
        scope = names.get(self.scope, self.scope)
        if len(self.labels) == self.scope_size:
            return f"{scope}: all {self.scope_size} envs" if self.scope_size > 1 else f"{scope}: {self.labels[0]}"
        shown = ", ".join(self.labels[:most]) + (
            f" and {len(self.labels) - most} more" if len(self.labels) > most else ""
        )
        return f"{scope}: {len(self.labels)} of {self.scope_size} envs ({shown})"


def compare(
    labels_by_family: Mapping[str, Sequence[str]],
    game_of: Mapping[str, str],
    heldout_rows: Mapping[tuple[str, str], Sequence[EpisodeRow]],
    entries: Sequence[str],
    normalise: Callable[[EpisodeRow], float | None],
) -> list[Comparison]:
    """Every comparison of a leaderboard. ``heldout_rows``: (entry, env label) -> its held-out episodes;
    ``game_of``: env label -> the game it counts for (the strata of the bootstrap)."""
    played = {e: {label for (entry, label) in heldout_rows if entry == e} for e in entries}

    def standing(entry: str, labels: Sequence[str], own: bool) -> Standing:
        per_game: dict[str, list[float]] = defaultdict(list)
        for label in labels:
            per_game[game_of[label]] += [v for r in heldout_rows[(entry, label)] if (v := normalise(r)) is not None]
        return Standing(entry, stratified_bootstrap_iqm(list(per_game.values())), len(per_game), own)

    def comparison(scope: str, labels: Sequence[str], members: Sequence[str], own: set[str], size: int) -> Comparison:
        standings = sorted((standing(e, labels, e in own) for e in members), key=lambda s: _lower(s.iqm), reverse=True)
        return Comparison(scope, tuple(labels), tuple(standings), size)

    out = []
    every = [label for labels in labels_by_family.values() for label in labels]
    complete = [e for e in entries if every and set(every) <= played[e]]
    if len(labels_by_family) > 1 and len(complete) >= 2:
        out.append(comparison(SUITE, every, complete, set(complete), len(every)))
    for family, family_labels in labels_by_family.items():
        sets: dict[frozenset[str], list[str]] = defaultdict(list)  # an entry's envs of this family -> entries
        for e in entries:
            mine = frozenset(played[e] & set(family_labels))
            if mine:
                sets[mine].append(e)
        # The largest sets first (the family's complete set leads); within a size, in the suite's env order.
        order = sorted(sets, key=lambda s: (-len(s), [family_labels.index(label) for label in family_labels
                                                      if label in s]))  # fmt: skip
        for labels in order:
            members = [e for e in entries if labels <= played[e]]
            ordered = [label for label in family_labels if label in labels]
            out.append(comparison(family, ordered, members, set(sets[labels]), len(family_labels)))
    return out


def _lower(estimate: Estimate) -> float:
    """The ranking key: the CI's lower bound (the value where the CI is undefined; no episodes rank last)."""
    if estimate.n == 0 or math.isnan(estimate.value):
        return float("-inf")
    return estimate.value if math.isnan(estimate.low) else estimate.low
