"""A character canvas that maps screen pixels onto a rows x cols text grid.

Row 0 of the grid is a header line; rows 1.. show the play area. Every drawing call is vectorised over precomputed
cell indices, so drawing a frame costs a few array writes rather than a Python loop over cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ASCII_PRESETS: dict[str, tuple[int, int]] = {
    "default": (24, 80),
    "compact": (16, 32),
}
"""Named grid sizes (rows, cols): ``default`` matches the nanoGPT seed; ``compact`` is for CPU training."""

_NEWLINE, _SPACE = ord("\n"), ord(" ")


@dataclass(frozen=True)
class GridMap:
    """Maps the screen rectangle ``x in [x0, x1), y in [y0, y1)`` onto grid rows ``1..rows-1`` and all columns."""

    rows: int
    cols: int
    x0: int
    x1: int
    y0: int
    y1: int

    def __post_init__(self) -> None:
        if self.rows < 4 or self.cols < 8:
            raise ValueError(f"an ASCII grid needs at least 4 rows and 8 columns, got {self.rows}x{self.cols}")

    def col(self, x: float) -> int:
        """Grid column of screen x (clipped to the grid)."""
        c = int((x - self.x0) * self.cols / (self.x1 - self.x0))
        return min(max(c, 0), self.cols - 1)

    def row(self, y: float) -> int:
        """Grid row of screen y (clipped to the play rows)."""
        r = 1 + int((y - self.y0) * (self.rows - 1) / (self.y1 - self.y0))
        return min(max(r, 1), self.rows - 1)

    def col_span(self, x_start: float, x_end: float) -> slice:
        """Columns covered by the screen interval [x_start, x_end), at least one."""
        first = self.col(x_start)
        return slice(first, max(first + 1, self.col(x_end - 1) + 1))

    def row_span(self, y_start: float, y_end: float) -> slice:
        """Rows covered by the screen interval [y_start, y_end), at least one."""
        first = self.row(y_start)
        return slice(first, max(first + 1, self.row(y_end - 1) + 1))


class Canvas:
    """A reusable byte canvas of ``rows`` lines of ``cols`` characters, redrawn incrementally.

    ``background`` is the static layer (walls, and the brick wall between changes); moving things are drawn with
    :meth:`put` and erased back to the static layer at the next :meth:`begin`, so a frame costs a handful of tiny
    array writes instead of a full copy.
    """

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self.background = np.full((rows, cols + 1), _SPACE, dtype=np.uint8)
        self.background[:, -1] = _NEWLINE
        self.pixels = self.background.copy()
        self._moving: list[tuple[object, object]] = []
        self._header = b""

    @property
    def static(self) -> np.ndarray:
        """The writable (rows, cols) view of the static layer, for drawing walls once."""
        return self.background[:, :-1]

    def reset(self) -> None:
        """Forget everything drawn: the canvas shows the static layer again."""
        np.copyto(self.pixels, self.background)
        self._moving.clear()
        self._header = b""

    def begin(self) -> None:
        """Start a frame: erase what :meth:`put` drew in the last one."""
        for index in self._moving:
            self.pixels[index] = self.background[index]
        self._moving.clear()

    def put(self, rows: object, cols: object, char: str) -> None:
        """Draw a moving thing (erased at the next :meth:`begin`)."""
        self.pixels[rows, cols] = ord(char)
        self._moving.append((rows, cols))

    def set_static(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        """Change part of the static layer (and the frame) in place."""
        self.background[rows, cols] = values
        self.pixels[rows, cols] = values

    def header(self, text: str) -> None:
        """Write ``text`` (cut to the width) on row 0."""
        raw = text.encode("ascii", "replace")[: self.cols]
        if raw != self._header:
            self.pixels[0, :-1] = self.background[0, :-1]
            self.pixels[0, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            self._header = raw

    def render(self) -> str:
        """The frame as one string, rows joined by newlines."""
        return self.pixels.tobytes()[:-1].decode("ascii")
