"""Breakout: RAM map, text description, ASCII drawing, shaping potential and a ball tracker.

RAM offsets (verified against the rendered frame in tests/envs/test_atari_ram.py): paddle left x = ram[72] - 47
(16 px wide), ball x = ram[99] - 49, ball y = ram[101] + 9 (ram[101] == 0: no ball in play), lives = ram[57],
score in BCD at ram[76] (hundreds) and ram[77]. Bricks: ram[0..35] hold six playfield registers per brick row
(byte = register * 6 + row counted from the bottom); each brick is a pair of bits and the map below says which
screen column each visible pair draws; the remaining pairs lie under the walls.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from llm_gym.envs.atari.game import AtariGame, ball_fields, bcd

BRICK_ROWS, BRICK_COLS = 6, 18
PADDLE_WIDTH, PADDLE_Y = 16, 189
LEFT_WALL, RIGHT_WALL = 8, 152  # inner edges of the side walls
BRICKS_TOP, BRICK_HEIGHT, BRICK_WIDTH = 57, 6, 8

# (register, bit pair) -> screen brick column, found by breaking bricks and diffing RAM against the frame.
_PAIR_COLUMN: dict[tuple[int, int], int] = {
    **{(0, p): 15 + p for p in range(3)},
    **{(1, p): 14 - p for p in range(4)},
    **{(2, p): 7 + p for p in (2, 3)},
    **{(3, p): 5 + p for p in range(4)},
    **{(4, p): 4 - p for p in range(4)},
    (5, 3): 0,
}


def _brick_source() -> np.ndarray:
    """Index into the (register, row, pair) bit array for every screen brick (row 0 = top)."""
    source = np.zeros((BRICK_ROWS, BRICK_COLS), dtype=np.intp)
    for (register, pair), column in _PAIR_COLUMN.items():
        for ram_row in range(BRICK_ROWS):
            source[BRICK_ROWS - 1 - ram_row, column] = (register * BRICK_ROWS + ram_row) * 4 + pair
    return source


_BRICK_SOURCE = _brick_source()


def read_bricks(ram: np.ndarray) -> np.ndarray:
    """The (6, 18) grid of bricks still standing, row 0 at the top of the screen."""
    bits = np.unpackbits(ram[:36, None], axis=1, bitorder="little")  # (36, 8): byte = register*6 + row
    pairs = bits[:, 0::2].reshape(-1)  # one bit per pair is enough: a hit clears both
    return pairs[_BRICK_SOURCE].astype(bool)


class BreakoutState(NamedTuple):
    """Breakout as decoded from RAM; positions are screen pixels (x right, y down)."""

    paddle_x: int
    """Left edge of the 16 px paddle."""
    ball_x: int | None
    ball_y: int | None
    ball_dx: int
    """Sign of the ball's horizontal motion since the last step (0 when unknown)."""
    ball_dy: int
    lives: int
    score: int
    bricks: tuple[tuple[bool, ...], ...]
    """6 rows x 18 columns, row 0 at the top: True where a brick stands. Immutable, so states can share it."""
    bricks_left: int
    previous_ball_x: int | None = None
    """The ball one step earlier (None after a reset, or when it was not in play); drawn as the ASCII trail."""
    previous_ball_y: int | None = None

    @property
    def paddle_centre(self) -> float:
        return self.paddle_x + PADDLE_WIDTH / 2


class Breakout(AtariGame):
    ale_name = "breakout"
    title = "Breakout"
    play_area = (LEFT_WALL - 8, RIGHT_WALL + 8, 32, 196)
    offset_span = RIGHT_WALL - LEFT_WALL
    offset_words = ("right of", "left of", "at")
    paddle_name = "paddle"
    no_ball_words = "no ball in play: FIRE to serve."
    instructions = (
        "You play Atari Breakout. You move a paddle along the bottom of the screen to bounce a ball into a wall of "
        "bricks. Each brick you break scores points (1 to 7; higher rows are worth more). You lose a life when the "
        "ball falls past the paddle, and the game ends when all 5 lives are lost. Positions are screen pixels: x "
        "grows to the right (the play area is x=8..151), y grows downwards (the paddle is at y=189, 16 px wide). "
        "Actions: NOOP does nothing, FIRE serves a new ball, RIGHT and LEFT move the paddle. "
        "Keep the paddle under the ball. Answer with exactly one action name."
    )

    def __init__(self, rows: int, cols: int) -> None:
        super().__init__(rows, cols)
        # A cell shows '#' while any brick overlapping it stands, so no brick row vanishes on a coarse grid.
        overlap = self._cell_brick_overlap()
        cells = np.flatnonzero(overlap.any(axis=1))
        self._brick_rows, self._brick_cols = np.divmod(cells, self.grid.cols)
        self._brick_rows += 1  # row 0 is the header
        self._cell_bricks = overlap[cells].astype(np.float32)
        self._brick_bytes = b""
        self._drawn_bricks: tuple[tuple[bool, ...], ...] | None = None
        self._paddle_row = self.grid.row(PADDLE_Y)

    def _cell_brick_overlap(self) -> np.ndarray:
        """(play cells, bricks) matrix: True where a grid cell's screen rectangle overlaps a brick's."""
        g = self.grid
        cell_w, cell_h = (g.x1 - g.x0) / g.cols, (g.y1 - g.y0) / (g.rows - 1)
        cx0 = g.x0 + np.arange(g.cols) * cell_w
        cy0 = g.y0 + np.arange(g.rows - 1) * cell_h
        bx0 = LEFT_WALL + np.arange(BRICK_COLS) * BRICK_WIDTH
        by0 = BRICKS_TOP + np.arange(BRICK_ROWS) * BRICK_HEIGHT
        x_hit = (cx0[:, None] < bx0[None, :] + BRICK_WIDTH) & (bx0[None, :] < cx0[:, None] + cell_w)  # (cols, 18)
        y_hit = (cy0[:, None] < by0[None, :] + BRICK_HEIGHT) & (by0[None, :] < cy0[:, None] + cell_h)  # (rows-1, 6)
        both = y_hit[:, None, :, None] & x_hit[None, :, None, :]  # (rows-1, cols, 6, 18)
        return both.reshape((g.rows - 1) * g.cols, BRICK_ROWS * BRICK_COLS)

    def read(self, ram: np.ndarray, previous: BreakoutState | None) -> BreakoutState:
        ball_raw, ball_x_raw = int(ram[101]), int(ram[99])
        in_play = ball_raw != 0
        ball_x = ball_x_raw - 49 if in_play else None
        ball_y = ball_raw + 9 if in_play else None
        # Bricks change on few steps; decode them only when their RAM bytes did.
        brick_bytes = ram[:36].tobytes()
        if previous is not None and brick_bytes == self._brick_bytes:
            bricks, left = previous.bricks, previous.bricks_left
        else:
            grid = read_bricks(ram)
            bricks = tuple(tuple(row) for row in grid.tolist())
            left = int(grid.sum())
            self._brick_bytes = brick_bytes
        return BreakoutState(
            paddle_x=int(ram[72]) - 47,
            **ball_fields(ball_x, ball_y, previous),
            lives=int(ram[57]),
            score=bcd(int(ram[76])) * 100 + bcd(int(ram[77])),
            bricks=bricks,
            bricks_left=left,
        )

    def status_words(self, state: BreakoutState) -> str:
        head = f"score {state.score}, lives {state.lives}, bricks {state.bricks_left}/{BRICK_ROWS * BRICK_COLS}."
        return f"{head} paddle x={state.paddle_x}..{state.paddle_x + PADDLE_WIDTH - 1}."

    def draw_background(self, cells: np.ndarray) -> None:
        cells[1:, 0] = cells[1:, -1] = ord("|")
        cells[1, :] = ord("-")

    def draw(self, state: BreakoutState) -> str:
        canvas = self.canvas
        canvas.begin()
        if state.bricks is not self._drawn_bricks:  # the wall changes on few steps
            standing = self._cell_bricks @ np.asarray(state.bricks, dtype=np.float32).reshape(-1) > 0
            canvas.set_static(self._brick_rows, self._brick_cols, np.where(standing, ord("#"), ord(" ")))
            self._drawn_bricks = state.bricks
        canvas.put(self._paddle_row, self.grid.col_span(state.paddle_x, state.paddle_x + PADDLE_WIDTH), "=")
        return self.finish_drawing(state, f"score {state.score} lives {state.lives} bricks {state.bricks_left}")

    def paddle_offset(self, state: BreakoutState) -> float:
        return state.ball_x + 1 - state.paddle_centre

    def awaits_serve(self, state: BreakoutState) -> bool:
        return state.ball_x is None and state.lives > 0

    scripted_aims = ("ball", "landing")

    def scripted_action(self, state: BreakoutState, *, aim: str = "ball", deadband: int = 0) -> str:
        """Towards the ball (or, with ``aim="landing"``, where a falling ball will reach the paddle row); no move
        within ``deadband`` px, by default half the paddle (the ball is over it already)."""
        if state.ball_x is None:
            return "FIRE"
        landing = landing_x(state) if aim == "landing" else None
        target = state.ball_x if landing is None else landing
        offset = target + 1 - state.paddle_centre  # +1: the ball's centre, as paddle_offset
        if abs(offset) < (deadband or PADDLE_WIDTH // 2):
            return "NOOP"
        return "RIGHT" if offset > 0 else "LEFT"


def reflect(x: float, low: float = LEFT_WALL, high: float = RIGHT_WALL - 1) -> float:
    """Where a ball that travelled to ``x`` ends up between side walls at ``low`` and ``high`` that reflect it (a
    zig-zag of period twice the gap)."""
    span = high - low
    folded = (x - low) % (2 * span)
    return low + (folded if folded <= span else 2 * span - folded)


def landing_x(state: BreakoutState) -> float | None:
    """The ball's x where it will reach the paddle row, from its last two positions, the side walls reflecting it;
    None unless it is falling (rising, or no earlier position yet)."""
    if state.ball_x is None or state.previous_ball_x is None or state.previous_ball_y is None:
        return None
    vx, vy = state.ball_x - state.previous_ball_x, state.ball_y - state.previous_ball_y
    if vy <= 0:
        return None
    return reflect(state.ball_x + vx * (PADDLE_Y - state.ball_y) / vy)
