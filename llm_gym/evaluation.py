"""Play whole episodes with a batched policy: ``llm-gym play``, periodic evaluation in agents, and benchmarks.

Episodes run in lockstep over ``num_envs`` envs so a policy decides for all of them in one call. Episode ``i`` is
reset with seed ``seed + i`` (and ``task_id`` from ``task_ids`` if given), so results do not depend on
``num_envs``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy
from llm_gym.envs.catalog import render_modes
from llm_gym.errors import UnsupportedEnvError


@dataclass
class EpisodeResult:
    """One finished episode."""

    index: int
    seed: int
    episode_return: float
    length: int
    truncated: bool
    """True when cut by the env's time limit or by ``max_steps``, not ended by the game."""
    invalid_actions: int = 0
    final_info: dict[str, Any] = field(default_factory=dict, repr=False)


def run_episodes(
    policy: Policy,
    env: EnvConfig,
    episodes: int,
    *,
    seed: int = 0,
    num_envs: int = 1,
    max_steps: int | None = None,
    video_path: str | Path | None = None,
    task_ids: Sequence[int] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Play ``episodes`` episodes and return them in episode order.

    Args:
        policy: acts on a batch of observations.
        env: the env id and its kwargs.
        episodes: how many episodes to play.
        seed: episode ``i`` resets with ``seed + i``.
        num_envs: how many envs step in lockstep (one policy call per step for all of them).
        max_steps: cut an episode after this many steps (marked ``truncated``).
        video_path: record episode 0 as a video (needs an env that renders ``rgb_array`` frames).
        task_ids: task id of each episode (``options={"task_id": ...}``), cycled.
        on_episode: called as each episode finishes.
    """
    num_envs = max(1, min(num_envs, episodes))
    recording = video_path is not None
    if recording and "rgb_array" not in render_modes(env.env_id):
        raise UnsupportedEnvError(f"{env.env_id} renders no frames, so it cannot record a video; drop --video")
    envs = [env.make(render_mode="rgb_array") if (recording and i == 0) else env.make() for i in range(num_envs)]
    # Frames stream straight into the encoder: a long Atari episode would not fit in memory as raw frames.
    video = VideoWriter(video_path, fps=envs[0].metadata.get("render_fps", 15)) if recording else None
    results: dict[int, EpisodeResult] = {}
    next_episode = 0
    slots: list[dict[str, Any] | None] = [None] * num_envs

    def start(slot: int) -> None:
        nonlocal next_episode
        if next_episode >= episodes:
            slots[slot] = None
            return
        index = next_episode
        next_episode += 1
        options = {"task_id": int(task_ids[index % len(task_ids)])} if task_ids else None
        obs, info = envs[slot].reset(seed=seed + index, options=options)
        slots[slot] = {"index": index, "obs": obs, "info": info, "return": 0.0, "length": 0, "invalid": 0}
        if video and index == 0:
            video.add(envs[slot].render())

    try:
        for slot in range(num_envs):
            start(slot)
        while any(slots):
            active = [i for i, s in enumerate(slots) if s is not None]
            actions = policy.act([slots[i]["obs"] for i in active], [slots[i]["info"] for i in active])
            for slot, action in zip(active, actions, strict=True):
                state = slots[slot]
                obs, reward, terminated, truncated, info = envs[slot].step(action)
                state["return"] += float(reward)
                state["length"] += 1
                state["invalid"] += int(bool(info.get("invalid_action", False)))
                state["obs"], state["info"] = obs, info
                if video and state["index"] == 0:
                    video.add(envs[slot].render())
                cut = max_steps is not None and state["length"] >= max_steps
                if terminated or truncated or cut:
                    result = EpisodeResult(
                        index=state["index"],
                        seed=seed + state["index"],
                        episode_return=state["return"],
                        length=state["length"],
                        truncated=bool(truncated or (cut and not terminated)),
                        invalid_actions=state["invalid"],
                        final_info={k: v for k, v in info.items() if _plain(v)},
                    )
                    results[result.index] = result
                    if on_episode:
                        on_episode(result)
                    start(slot)
    finally:
        for e in envs:
            e.close()
        if video:
            video.close()
    return [results[i] for i in sorted(results)]


def _plain(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


class VideoWriter:
    """Writes RGB frames to an mp4 as they come (H.264 through the ffmpeg that imageio-ffmpeg ships).

    A video is a side job: where it cannot be written (no ffmpeg plugin, a full disk) the writer gives one warning
    naming the fix and drops the rest of the frames, and the episode (or the training run around it) goes on.
    """

    def __init__(self, path: str | Path, fps: int = 15) -> None:
        self.path, self.fps = Path(path), fps
        self._writer: Any = None
        self.failed = False

    def add(self, frame: Any) -> None:
        if self.failed:
            return
        try:
            if self._writer is None:
                import imageio.v2 as imageio

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


class VideoWarning(UserWarning):
    """A video could not be written; what was being recorded goes on without it."""


class Stopwatch:
    """Seconds since creation; ``rate(n)`` = n per second."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def rate(self, count: float) -> float:
        return count / max(self.elapsed, 1e-9)
