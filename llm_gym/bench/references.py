"""Published Atari reference scores for human-normalised scores: ``(score - random) / (human - random)``.

Both references come from Mnih et al., "Human-level control through deep reinforcement learning", Nature 518,
529-533 (2015), Extended Data Table 2 ("Random play" and "Human" columns, the ones most later work normalises by,
e.g. Badia et al., "Agent57", ICML 2020, and Agarwal et al., rliable, NeurIPS 2021). They were measured under DQN's
protocol (up to 30 no-op starts, 5-minute episodes, no sticky actions); llm-gym's envs use ALE v5 settings (sticky
actions 0.25, frameskip 4) and the suite's step caps, so a normalised score here is comparable in scale, not to the
decimal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AtariReference:
    """Random-play and human scores of one game (raw game return: Pong is own points minus the opponent's)."""

    random: float
    human: float
    source: str = "Mnih et al. 2015 (Nature 518), Extended Data Table 2"

    def normalise(self, score: float) -> float:
        return (score - self.random) / (self.human - self.random)


ATARI_REFERENCES: dict[str, AtariReference] = {
    "breakout": AtariReference(random=1.7, human=30.5),
    "pong": AtariReference(random=-20.7, human=14.6),
}
"""Keyed by the lower-case ALE game name."""


def atari_game(env_id: str) -> str | None:
    """``breakout`` / ``pong`` for the LLM Atari ids, else None."""
    for game in ATARI_REFERENCES:
        if env_id.lower().startswith(f"llm{game}"):
            return game
    return None
