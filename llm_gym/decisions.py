"""Per-decision details a policy may report beside its actions (for the bench's trajectory viewer).

``Policy.act`` stays the contract. A policy that can say more implements the optional method::

    def act_with_details(self, observations, infos) -> tuple[list[action], list[DecisionDetails]]

returning the same actions ``act`` would, plus one :class:`DecisionDetails` per observation. :func:`act_with_details`
calls it where present and falls back to ``act`` with empty details, so callers never probe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict


class DecisionDetails(TypedDict, total=False):
    """What a policy knew when it chose; every key is optional."""

    probs: list[float]
    """Probability of each legal action, in ``info["legal_actions"]`` order (exact in score mode)."""
    value: float
    """The policy's value estimate of the observation."""
    answer: str
    """The text the model wrote (generate mode)."""
    tokens: int
    """Tokens generated for this decision."""


def act_with_details(
    policy: Any, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
) -> tuple[list[Any], list[DecisionDetails]]:
    """Actions and per-decision details: the policy's own ``act_with_details`` where it has one."""
    method = getattr(policy, "act_with_details", None)
    if method is not None:
        actions, details = method(observations, infos)
        return list(actions), list(details)
    return list(policy.act(observations, infos)), [DecisionDetails() for _ in observations]
