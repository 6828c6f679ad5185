"""The three observation modes of an Atari game: text, ASCII and vision. Each sets its own observation space."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from llm_gym.envs.atari.env import AtariLLMEnv
from llm_gym.envs.atari.grid import ASCII_PRESETS
from llm_gym.envs.atari.upscale import RowCachedResize
from llm_gym.envs.spaces import text_space
from llm_gym.errors import ConfigError

TEXT_MAX_LENGTH = 512
SCREEN_HEIGHT, SCREEN_WIDTH = 210, 160


class AtariTextEnv(AtariLLMEnv):
    """Observation: a short structured description from RAM plus the legal actions."""

    def __init__(self, game: str = "breakout", **kwargs: Any) -> None:
        super().__init__(game, **kwargs)
        self.observation_space = text_space(TEXT_MAX_LENGTH)

    def _observe(self, state: Any) -> str:
        return self.describe(state)


class AtariAsciiEnv(AtariLLMEnv):
    """Observation: a rows x cols character grid drawn from the game state (row 0 is a score line).

    Args:
        preset: ``default`` (24 x 80) or ``compact`` (16 x 32); ``rows``/``cols`` override it.
        ball_trail: also draw where the ball was one step earlier, as ``.`` (a single grid shows no velocity;
            the trail shows its direction without a second frame).
    """

    def __init__(
        self,
        game: str = "breakout",
        *,
        preset: str = "default",
        rows: int | None = None,
        cols: int | None = None,
        ball_trail: bool = False,
        **kwargs: Any,
    ) -> None:
        if preset not in ASCII_PRESETS:
            raise ValueError(f"unknown ASCII preset {preset!r}; choose one of {sorted(ASCII_PRESETS)}")
        preset_rows, preset_cols = ASCII_PRESETS[preset]
        if type(ball_trail) is not bool:
            raise ConfigError(f"ball_trail must be true or false, got {ball_trail!r}")
        super().__init__(game, rows=rows or preset_rows, cols=cols or preset_cols, **kwargs)
        self.game.ball_trail = ball_trail
        self.rows, self.cols = self.game.canvas.rows, self.game.canvas.cols
        self.observation_space = text_space(self.rows * (self.cols + 1) - 1)

    def _observe(self, state: Any) -> str:
        return self.game.draw(state)


class AtariVisionEnv(AtariLLMEnv):
    """Observation: ``{"image": uint8 (H, W, 3) frame, "text": the text description}``.

    Args:
        image_size: (height, width) of the image, nearest-neighbour scaled from the 210 x 160 frame (an int: square).
    """

    def __init__(
        self, game: str = "breakout", *, image_size: tuple[int, int] | int = (384, 384), **kwargs: Any
    ) -> None:
        super().__init__(game, **kwargs)
        height, width = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if height < 1 or width < 1:
            raise ValueError(f"image_size must be positive, got {image_size}")
        self._resize = RowCachedResize((SCREEN_HEIGHT, SCREEN_WIDTH), height, width)
        self._frame = np.empty((SCREEN_HEIGHT, SCREEN_WIDTH, 3), dtype=np.uint8)
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (height, width, 3), dtype=np.uint8),
                "text": text_space(TEXT_MAX_LENGTH),
            }
        )

    def _observe(self, state: Any) -> dict[str, Any]:
        self.ale.getScreenRGB(self._frame)
        return {"image": self._resize(self._frame), "text": self.describe(state)}
