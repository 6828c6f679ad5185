"""Pong: RAM map, text description, ASCII drawing, shaping potential and a ball tracker.

RAM offsets (verified against the rendered frame in tests/envs/test_atari_ram.py): ball x = ram[49] - 49,
ball y = ram[54] - 14 (ram[54] == 0 or ram[49] == 0: no ball in play; right after a reset ram[54] still holds a
stale line while nothing is drawn; the frame may draw the ball one line higher), player (right,
green) paddle top y = ram[51] - 13 rounded down to an even line,
CPU (left, orange) paddle top y = ram[50] - 15 (above the field at the start of a game, before the CPU's paddle
is drawn: then not in view), scores ram[13] (CPU) and ram[14] (player). Paddles are 16 px tall;
the player's paddle is at x=140..143, the CPU's at x=16..19. ALE's RIGHT moves the player's paddle up, LEFT down.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from llm_gym.envs.atari.game import AtariGame, ball_fields

PADDLE_HEIGHT = 16
PLAYER_X, CPU_X = 140, 16
FIELD_TOP, FIELD_BOTTOM = 34, 194


class PongState(NamedTuple):
    """Pong as decoded from RAM; positions are screen pixels (x right, y down)."""

    player_y: int
    """Top of your (right) paddle."""
    cpu_y: int | None
    """Top of the CPU's (left) paddle; None while it is not drawn (the first frames of a game)."""
    ball_x: int | None
    ball_y: int | None
    ball_dx: int
    ball_dy: int
    player_score: int
    cpu_score: int
    previous_ball_x: int | None = None
    """The ball one step earlier (None after a reset, or when it was not in play); drawn as the ASCII trail."""
    previous_ball_y: int | None = None

    @property
    def player_centre(self) -> float:
        return self.player_y + PADDLE_HEIGHT / 2

    @property
    def score(self) -> int:
        return self.player_score


class Pong(AtariGame):
    ale_name = "pong"
    title = "Pong"
    play_area = (0, 160, FIELD_TOP, FIELD_BOTTOM)
    offset_span = FIELD_BOTTOM - FIELD_TOP
    offset_words = ("below", "above", "level with")
    paddle_name = "your paddle"
    no_ball_words = "no ball in play."
    action_labels = {"RIGHT": "UP", "LEFT": "DOWN", "RIGHTFIRE": "UPFIRE", "LEFTFIRE": "DOWNFIRE"}
    instructions = (
        "You play Atari Pong against the computer. You control the right paddle and move it up and down to hit the "
        "ball back; the computer plays the left paddle. You score a point when the ball gets past the computer, it "
        "scores when the ball gets past you; the first to 21 wins. Positions are screen pixels: x grows to the "
        "right (your paddle is at x=140), y grows downwards (the field is y=34..193; paddles are 16 px tall). "
        "Actions: NOOP does nothing, UP and DOWN move your paddle, FIRE serves. "
        "Keep your paddle level with the ball. Answer with exactly one action name."
    )

    def __init__(self, rows: int, cols: int) -> None:
        super().__init__(rows, cols)
        self._player_col = self.grid.col(PLAYER_X + 2)
        self._cpu_col = self.grid.col(CPU_X + 2)

    def read(self, ram: np.ndarray, previous: PongState | None) -> PongState:
        ball_raw, ball_x_raw, player_raw, cpu_raw = int(ram[54]), int(ram[49]), int(ram[51]), int(ram[50])
        in_play = ball_raw != 0 and ball_x_raw != 0  # x = -49 is off the screen: nothing is drawn
        ball_x = ball_x_raw - 49 if in_play else None
        ball_y = ball_raw - 14 if in_play else None
        return PongState(
            player_y=(player_raw - 13) & ~1,  # the kernel draws this paddle from even lines only
            cpu_y=cpu_raw - 15 if cpu_raw - 15 + PADDLE_HEIGHT > FIELD_TOP else None,
            **ball_fields(ball_x, ball_y, previous),
            player_score=int(ram[14]),
            cpu_score=int(ram[13]),
        )

    def status_words(self, state: PongState) -> str:
        head = f"you {state.player_score}, cpu {state.cpu_score}."
        cpu = "cpu paddle not in view" if state.cpu_y is None else f"cpu paddle y={state.cpu_y}"
        return f"{head} your paddle y={state.player_y}..{state.player_y + PADDLE_HEIGHT - 1}, {cpu}."

    def draw_background(self, cells: np.ndarray) -> None:
        cells[1, :] = cells[-1, :] = ord("-")
        cells[2:-1, self.grid.col(80)] = ord(":")

    def draw(self, state: PongState) -> str:
        canvas = self.canvas
        canvas.begin()
        canvas.put(self.grid.row_span(state.player_y, state.player_y + PADDLE_HEIGHT), self._player_col, "#")
        if state.cpu_y is not None:
            canvas.put(self.grid.row_span(state.cpu_y, state.cpu_y + PADDLE_HEIGHT), self._cpu_col, "|")
        return self.finish_drawing(state, f"you {state.player_score} cpu {state.cpu_score}")

    def paddle_offset(self, state: PongState) -> float:
        return state.ball_y + 2 - state.player_centre

    def scripted_action(self, state: PongState, *, aim: str = "ball", deadband: int = 0) -> str:
        """Follow the ball while it comes towards us, else wait mid-field; no move within 4 px (or ``deadband``)."""
        if state.ball_x is None:
            return "FIRE"
        target = state.ball_y + 2 if state.ball_dx > 0 else (FIELD_TOP + FIELD_BOTTOM) / 2
        offset = target - state.player_centre
        if (abs(offset) < deadband) if deadband else (abs(offset) <= 4):
            return "NOOP"
        return "LEFT" if offset > 0 else "RIGHT"  # ALE names: RIGHT moves up
