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


def ball_motion(ball_x: int | None, ball_y: int | None, previous: Any | None) -> tuple[int, int]:
    """The signs (dx, dy) of the ball's move since ``previous``: (0, 0) unless the ball is in play in both."""
    if ball_x is None or ball_y is None or previous is None or previous.ball_x is None:
        return 0, 0
    return sign(ball_x - previous.ball_x), sign(ball_y - previous.ball_y)


def previous_ball(previous: Any | None) -> tuple[int | None, int | None]:
    """Where the ball was in ``previous`` (``(None, None)`` after a reset or while no ball was in play)."""
    if previous is None:
        return None, None
    return previous.ball_x, previous.ball_y


def ball_fields(ball_x: int | None, ball_y: int | None, previous: Any | None) -> dict[str, Any]:
    """A game state's ball fields as read after ``previous``: where it is (``ball_x``, ``ball_y``), the signs of its
    move (``ball_dx``, ``ball_dy``) and where it was one step earlier (``previous_ball_x``, ``previous_ball_y``)."""
    dx, dy = ball_motion(ball_x, ball_y, previous)
    previous_x, previous_y = previous_ball(previous)
    return {
        "ball_x": ball_x,
        "ball_y": ball_y,
        "ball_dx": dx,
        "ball_dy": dy,
        "previous_ball_x": previous_x,
        "previous_ball_y": previous_y,
    }


def ball_words(state: Any, offset: int, sides: tuple[str, str, str], paddle: str) -> str:
    """'ball x=.. y=.. moving <direction>, <n> px <side> <paddle> centre.'; ``sides`` names a positive, a negative
    and a zero ``offset`` of the ball from the paddle centre."""
    side = sides[0] if offset > 0 else sides[1] if offset < 0 else sides[2]
    return (
        f"ball x={state.ball_x} y={state.ball_y} moving "
        f"{direction_words(state.ball_dx, state.ball_dy)}, {abs(offset)} px {side} {paddle} centre."
    )


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
    offset_span: ClassVar[int]
    """The widest ``paddle_offset`` the field allows: it scales the shaping potential to [-1, 0]."""
    offset_words: ClassVar[tuple[str, str, str]]
    """How ``describe`` says a positive, a negative and a zero ``paddle_offset`` ("right of", "left of", "at")."""
    paddle_name: ClassVar[str]
    """The player's paddle in ``describe`` ("paddle")."""
    no_ball_words: ClassVar[str]
    """What ``describe`` says when no ball is in play."""

    ball_trail: bool = False
    """Draw the ball's position one step earlier as ``.`` in the ASCII grid (set by the ASCII view's option)."""

    def __init__(self, rows: int, cols: int) -> None:
        self.grid = GridMap(rows, cols, *self.play_area)
        self.canvas = Canvas(rows, cols)
        self.draw_background(self.canvas.static)
        self.canvas.reset()

    @abc.abstractmethod
    def read(self, ram: np.ndarray, previous: Any | None) -> Any:
        """Decode RAM into a frozen state; ``previous`` (or None after reset) gives the ball's direction."""

    @abc.abstractmethod
    def status_words(self, state: Any) -> str:
        """The first sentences of ``describe``: score, lives and the paddles, in screen coordinates."""

    def describe(self, state: Any) -> str:
        """A short text description of ``state`` in screen coordinates: the status, then the ball (if in play) and
        where it is from the player's paddle centre."""
        if state.ball_x is None:
            return f"{self.status_words(state)} {self.no_ball_words}"
        ball = ball_words(state, round(self.paddle_offset(state)), self.offset_words, self.paddle_name)
        return f"{self.status_words(state)} {ball}"

    def draw_background(self, cells: np.ndarray) -> None:  # noqa: B027  (optional: most games have walls)
        """Draw what never moves (walls) once into the canvas background."""

    @abc.abstractmethod
    def draw(self, state: Any) -> str:
        """The ASCII grid of ``state``."""

    def finish_drawing(self, state: Any, header: str) -> str:
        """Put the ball (when in play) over what ``draw`` has put so far, its trail (``ball_trail``) under it, the
        header line on top, and render."""
        if state.ball_x is not None:
            # One frame shows no velocity; the trail gives its direction at no extra length. It goes on empty
            # cells only (never over a paddle or a brick), and where the ball stayed in its cell the 'o' covers it.
            if self.ball_trail and state.previous_ball_x is not None:
                row, col = self.grid.row(state.previous_ball_y + 2), self.grid.col(state.previous_ball_x + 1)
                if self.canvas.pixels[row, col] == ord(" "):
                    self.canvas.put(row, col, ".")
            self.canvas.put(self.grid.row(state.ball_y + 2), self.grid.col(state.ball_x + 1), "o")
        self.canvas.header(header)
        return self.canvas.render()

    @abc.abstractmethod
    def paddle_offset(self, state: Any) -> float:
        """The ball's signed distance from the player's paddle centre, along the axis the paddle moves on."""

    def ball_in_play(self, state: Any) -> bool:
        """Whether a ball is on the field (it is not between a loss or a point and the next serve)."""
        return state.ball_x is not None

    def potential(self, state: Any) -> float:
        """Shaping potential in [-1, 0]: 0 when the paddle is lined up with the ball (or no ball is in play)."""
        if not self.ball_in_play(state):
            return 0.0
        return -abs(self.paddle_offset(state)) / self.offset_span

    def awaits_serve(self, state: Any) -> bool:
        """Whether the game waits for FIRE to put a ball in play (``fire_on_reset`` presses until it does not).
        False by default: Pong serves by itself."""
        return False

    scripted_aims: tuple[str, ...] = ("ball",)
    """What ``scripted_action`` can aim at: ``ball`` (where the ball is now) and, where a game has it, ``landing``
    (where the ball will cross the player's paddle line, extrapolated from its last two positions)."""

    @abc.abstractmethod
    def scripted_action(self, state: Any, *, aim: str = "ball", deadband: int = 0) -> str:
        """The ALE action name a simple ball tracker would press: towards ``aim`` (one of ``scripted_aims``), and
        no move while the target is closer than ``deadband`` px (0: the game's own default)."""

    def score(self, state: Any) -> int:
        """The game's own score as shown on screen (the player's points)."""
        return int(state.score)
