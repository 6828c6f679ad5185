"""What the Atari env needs from one game: read RAM into a state, describe it, draw it, shape reward, play it."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from llm_gym.envs.atari.grid import Canvas, GridMap


def direction_words(dx: int, dy: int) -> str:
    """'up-left', 'down', ... from the signs of a screen-space velocity (y grows downwards)."""
    vertical = "down" if dy > 0 else "up" if dy < 0 else ""
    horizontal = "right" if dx > 0 else "left" if dx < 0 else ""
    return "-".join(p for p in (vertical, horizontal) if p) or "still"


def sign(value: int) -> int:
    return (value > 0) - (value < 0)


def bcd(value: int) -> int:
    """Decode one binary-coded-decimal byte (0x42 -> 42)."""
    return (value >> 4) * 10 + (value & 0x0F)


class AtariGame(abc.ABC):
    """One Atari game as the LLM envs see it. Subclasses are stateless apart from precomputed drawing tables."""

    ale_name: ClassVar[str]
    """The ROM name ale-py knows (``breakout``)."""
    title: ClassVar[str]
    instructions: ClassVar[str]
    """Rules text for a system prompt."""
    action_labels: ClassVar[dict[str, str]] = {}
    """ALE action name -> the name shown to models, where they differ (Pong's RIGHT moves the paddle up)."""
    play_area: ClassVar[tuple[int, int, int, int]]
    """Screen rectangle (x0, x1, y0, y1) that the ASCII view draws."""

    def __init__(self, rows: int, cols: int) -> None:
        self.grid = GridMap(rows, cols, *self.play_area)
        self.canvas = Canvas(rows, cols)
        self.draw_background(self.canvas.static)
        self.canvas.reset()

    @abc.abstractmethod
    def read(self, ram: np.ndarray, previous: Any | None) -> Any:
        """Decode RAM into a frozen state; ``previous`` (or None after reset) gives the ball's direction."""

    @abc.abstractmethod
    def describe(self, state: Any) -> str:
        """A short text description of ``state`` in screen coordinates."""

    def draw_background(self, cells: np.ndarray) -> None:  # noqa: B027  (optional: most games have walls)
        """Draw what never moves (walls) once into the canvas background."""

    @abc.abstractmethod
    def draw(self, state: Any) -> str:
        """The ASCII grid of ``state``."""

    @abc.abstractmethod
    def potential(self, state: Any) -> float:
        """Shaping potential in [-1, 0]: 0 when the paddle is lined up with the ball."""

    @abc.abstractmethod
    def scripted_action(self, state: Any) -> str:
        """The ALE action name a simple ball tracker would press."""

    def score(self, state: Any) -> int:
        """The game's own score as shown on screen (the player's points)."""
        return int(state.score)
