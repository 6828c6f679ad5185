"""Videos of episodes: frames stream straight into an mp4 encoder (a long Atari episode would not fit in memory as
raw frames). A video is a side job: where it cannot be written it gives one warning naming the fix, and the episode,
or the training run around it, goes on."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym


class VideoWarning(UserWarning):
    """A video could not be written; what was being recorded goes on without it."""


class VideoWriter:
    """Writes RGB frames to an mp4 as they come (H.264 through the ffmpeg that imageio-ffmpeg ships)."""

    def __init__(self, path: str | Path, fps: int = 15) -> None:
        self.path, self.fps = Path(path), fps
        self._writer: Any = None
        self.failed = False

    def add(self, frame: Any) -> None:
        if self.failed:
            return
        try:
            if self._writer is None:
                import imageio.v2 as imageio  # `import llm_gym` loads this module; imageio waits for a first frame

                self.path.parent.mkdir(parents=True, exist_ok=True)
                # macro_block_size=1 keeps odd frame sizes (160 x 210) instead of resizing them with a warning.
                self._writer = imageio.get_writer(
                    self.path, fps=self.fps, codec="libx264", macro_block_size=1, quality=7
                )
            self._writer.append_data(frame)
        except Exception as exc:  # any failure of the encoder stack: the video is optional, the run is not
            self._give_up(exc)

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except Exception as exc:
                self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        self.failed = True
        self._writer = None
        warnings.warn(
            f"video {self.path} not written ({type(exc).__name__}: {exc}); it needs imageio's ffmpeg plugin "
            "(pip install imageio-ffmpeg) and a writable .mp4 path. Going on without it.",
            VideoWarning,
            stacklevel=3,
        )


class RecordFirstEpisode(gym.Wrapper):
    """Records the first episode after it is made (reset frame, then one frame per step) into ``path``; the env
    must have been made with ``render_mode="rgb_array"``."""

    def __init__(self, env: gym.Env, path: str | Path) -> None:
        super().__init__(env)
        self.writer = VideoWriter(path, fps=env.metadata.get("render_fps", 15))
        self.episodes = 0
        self.recording = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.recording = self.episodes == 0
        self.episodes += 1
        if self.recording:
            self.writer.add(self.env.render())
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.recording:
            self.writer.add(self.env.render())
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.writer.close()
        super().close()
