"""Critic-free advantage estimators over groups of episodes that started from the same point.

llm-gym's envs reproduce a start exactly from (task id, seed), so G episodes reset with the same ones differ only
by the learner's own choices (and whatever those choices change downstream). Comparing each episode's return with
the others of its group measures what the learner's choices were worth, with no value head to fit:

* ``group`` (RLOO, Ahmadian et al. 2024; GRPO, Shao et al. 2024): every decision of an episode gets the episode's
  return minus the mean return of the *other* episodes of its group (leave-one-out, an unbiased baseline), optionally
  divided by the group's standard deviation (GRPO's scaling).
* ``step_group`` (GiGPO, Feng et al. 2025): decisions of a group that saw the identical observation form an anchor
  set; each gets its discounted reward-to-go minus the leave-one-out mean of its anchor set's, added (times a
  weight) to the episode-level advantage above. Where a group's episodes pass the same state with different
  actions, this credits the action taken there rather than the whole episode.

``gae`` (a value head and :func:`llm_gym.rl.gae.compute_gae`) stays the third estimator; :data:`ESTIMATORS` names
all three. Everything here is a pure function of plain tensors, tested against hand computations in
tests/rl/test_advantages.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

ESTIMATORS = ("gae", "group", "step_group", "exact")
"""The advantage estimators a learner can choose (``advantage=...``; ``exact``: every position of a small game's tree,
:mod:`llm_gym.training.position_tree`)."""
GROUP_ESTIMATORS = ("group", "step_group")
"""The estimators that need groups of episodes from one start, and no value head."""


def leave_one_out(values: torch.Tensor, groups: torch.Tensor, scale: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """``values[i]`` minus the mean of the other members of its group (0 for a member alone in its group, which
    has no baseline); with ``scale``, divided by its group's standard deviation (population std over all members;
    a group whose members all agree has advantages 0 either way).

    Args:
        values: (n,) one value per member (an episode's return, a decision's reward-to-go).
        groups: (n,) integer group label per member (any integers; members of one group need not be adjacent).
        scale: divide by the group's std (GRPO) rather than leave the advantages in return units (RLOO).
        eps: added to the std before dividing.
    """
    values = values.double()
    _, labels = torch.unique(groups, return_inverse=True)
    count = torch.zeros(int(labels.max()) + 1 if labels.numel() else 0, dtype=torch.float64)
    count.index_add_(0, labels, torch.ones_like(values))
    total = torch.zeros_like(count).index_add_(0, labels, values)
    n = count[labels]
    baseline = torch.where(n > 1, (total[labels] - values) / (n - 1).clamp(min=1), values)
    advantages = values - baseline
    if scale:
        mean = total / count.clamp(min=1)
        square = torch.zeros_like(count).index_add_(0, labels, (values - mean[labels]) ** 2)
        std = (square / count.clamp(min=1)).sqrt()
        spread = std[labels]
        advantages = torch.where(spread > 0, advantages / (spread + eps), torch.zeros_like(advantages))
    return advantages.float()


def rewards_to_go(rewards: Sequence[float], gamma: float) -> list[float]:
    """Discounted reward-to-go of each step of one episode: ``G_t = r_t + gamma * G_{t+1}``."""
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


@dataclass(frozen=True)
class EpisodeSteps:
    """One finished episode as a group estimator reads it."""

    group: int
    """The group it belongs to (episodes reset with the same task id and seed)."""
    rewards: tuple[float, ...]
    """The reward after each of its decisions, in order."""
    keys: tuple[Hashable, ...]
    """What each decision saw (e.g. the prompt's token ids): equal keys in one group form an anchor set
    (``step_group``)."""

    def __post_init__(self) -> None:
        if len(self.rewards) != len(self.keys):
            raise ValueError(f"an episode needs one key per reward, got {len(self.keys)} and {len(self.rewards)}")


def group_advantages(
    episodes: Sequence[EpisodeSteps],
    estimator: str,
    *,
    gamma: float = 1.0,
    scale: bool = False,
    step_weight: float = 1.0,
) -> list[torch.Tensor]:
    """Per episode, the advantage of each of its decisions under a group estimator.

    ``group``: the episode's return (its undiscounted sum of rewards, the game's own) minus the leave-one-out mean of
    its group's, the same for each of its decisions. ``step_group``: that plus ``step_weight`` times the decision's
    discounted reward-to-go (``gamma``) minus the leave-one-out mean over the decisions of its group with the same
    key. ``scale`` divides both parts by their set's std.
    """
    if estimator not in GROUP_ESTIMATORS:
        raise ValueError(f"not a group estimator: {estimator!r} (choose from {', '.join(GROUP_ESTIMATORS)})")
    if not episodes:
        return []
    returns = torch.tensor([sum(e.rewards) for e in episodes], dtype=torch.float64)
    groups = torch.tensor([e.group for e in episodes])
    episode_adv = leave_one_out(returns, groups, scale=scale)
    out = [episode_adv[i].expand(len(e.rewards)).clone() for i, e in enumerate(episodes)]
    if estimator == "group":
        return out
    # Anchor sets: (group, key) pairs, numbered in order of first appearance.
    anchors: dict[tuple[int, Hashable], int] = defaultdict(lambda: len(anchors))
    labels, togo = [], []
    for episode in episodes:
        labels.extend(anchors[(episode.group, key)] for key in episode.keys)
        togo.extend(rewards_to_go(episode.rewards, gamma))
    step_adv = leave_one_out(torch.tensor(togo, dtype=torch.float64), torch.tensor(labels), scale=scale)
    start = 0
    for i, episode in enumerate(episodes):
        out[i] = out[i] + step_weight * step_adv[start : start + len(episode.rewards)]
        start += len(episode.rewards)
    return out
