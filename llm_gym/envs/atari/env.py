"""The Atari env every observation mode shares: one real ALE game underneath, ALE v5 semantics by default.

A mode (text, ASCII, vision) is a small subclass in :mod:`llm_gym.envs.atari.views` that sets its own
``observation_space`` and ``_observe``. Everything else (dynamics, reward, shaping, task ids, info, the serve and
life-loss treatments) lives here, so scores compare across modes and with the Atari literature.

The two treatments of the Atari literature (SB3's ``FireResetEnv`` and ``EpisodicLifeEnv``) are options, off by
default (the raw ALE v5 game, what benchmarks compare with the literature); :attr:`AtariLLMEnv.training_defaults`
turns both on for the learning agents, and :attr:`AtariLLMEnv.evaluation_overrides` keeps evaluation on whole games
(docs/guides/atari.md says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from ale_py import ALEInterface, LoggerMode
from ale_py.env import AtariEnv

from llm_gym.envs.atari.breakout import Breakout
from llm_gym.envs.atari.game import AtariGame
from llm_gym.envs.atari.pong import Pong
from llm_gym.envs.inputs import action_id, env_name, int_option, reset_options
from llm_gym.errors import ConfigError, EnvInputError, UnknownNameError

GAMES: dict[str, type[AtariGame]] = {"breakout": Breakout, "pong": Pong}

STICKY_PRIMING_FRAMES = 16
"""Frames :meth:`AtariLLMEnv.restore_state` replays the snapshot's last action for before restoring again: ALE's
``cloneState`` leaves out the action sticky actions repeat, and each frame sets it with probability 0.75, so after
16 frames it is the snapshot's but with probability 0.25**16 (the emulator itself is restored after the priming)."""

MAX_SERVE_PRESSES = 4
"""FIRE presses ``fire_on_reset`` makes at most until the ball is in play: a sticky action (ALE v5 repeats the last
action with probability 0.25 per frame) swallows one press in 4 frames with probability 0.25**4."""

# ALE's banner ("A.L.E: Arcade Learning Environment ...") goes to stderr at every first env: keep errors only, so a
# command's stderr carries what concerns the user (one line for a mistake).
ALEInterface.setLoggerMode(LoggerMode.Error)


@dataclass(frozen=True)
class AtariSnapshot:
    """Everything needed to put an env back where it was (emulator, RNG, decoded state)."""

    ale_state: Any
    game_state: Any
    potential: float | None
    task_id: int
    continue_game: bool = False
    """The last episode ended on a life loss (``terminal_on_life_loss``): the next reset continues this game."""
    last_action: int = 0
    """The ALE action sent last: sticky actions repeat it, and ALE's own state does not hold it."""


class AtariLLMEnv(gym.Env):
    """One ALE game with LLM-friendly observations.

    Args:
        game: ``breakout`` or ``pong``.
        frameskip: emulator frames per step (ALE v5: 4).
        repeat_action_probability: sticky-action probability (ALE v5: 0.25).
        full_action_space: use all 18 Atari actions instead of the game's minimal set.
        max_num_frames_per_episode: truncate after this many emulator frames (ALE v5: 108000).
        reward_shaping: coefficient of potential-based shaping (paddle-ball alignment); 0 turns it off.
        shaping_gamma: discount in the shaping term ``coef * (gamma * phi(s') - phi(s))``.
        shaping_per_ball: sum the shaping over each ball's flight only: no shaping term on a step that loses the
            ball, ends the episode or has no ball in play, and the potential starts again at the next serve. By
            default the potential is 0 without a ball, so the step that loses it pays ``coef * |phi|`` back (the
            paddle's distance from the ball at the loss: up to ``coef``, several bricks' worth); with this option a
            ball lost away from the paddle keeps its cost. It is then no longer potential-based across a lost
            ball (a policy that loses balls further from the paddle than they were served earns less than one
            that never serves): train with ``fire_on_reset``, where nothing can stall.
        render_mode: ``rgb_array`` (the emulator frame) or ``ansi`` (the observation text).
        fire_on_reset: press FIRE after every reset and every life loss (SB3's ``FireResetEnv``), repeated while
            the game still waits for a serve (at most :data:`MAX_SERVE_PRESSES`), so a policy that never chooses
            FIRE still plays. The presses belong to the step (or reset) that needed them: their frames and rewards
            count there. Needs FIRE in the action set (Breakout and Pong have it).
        terminal_on_life_loss: end the episode (``terminated``) when a life is lost (SB3's ``EpisodicLifeEnv``, for
            training: a lost ball is a terminal state for the value function). The next ``reset`` then continues
            the same game from the next life instead of starting a new one: it ignores ``seed`` and ``task_id``
            (the emulator and its RNG go on), unless the game is over or ``options={"new_game": True}``. Scores
            stay the game's (``info["score"]`` counts from the start of the game); ``info["game_over"]`` tells a
            real end from a life loss.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array", "ansi"], "render_fps": 15}
    training_defaults: ClassVar[Mapping[str, Any]] = {"fire_on_reset": True, "terminal_on_life_loss": True}
    """Env arguments the learning agents train with unless the user sets them (:func:`llm_gym.training.loop.training_env`)."""
    evaluation_overrides: ClassVar[Mapping[str, Any]] = {"terminal_on_life_loss": False}
    """What every evaluation plays with whatever training used: whole games (:func:`llm_gym.training.evaluation_env`)."""
    reward_only_args: ClassVar[frozenset[str]] = frozenset({"reward_shaping", "shaping_gamma", "shaping_per_ball"})
    """Arguments that change only the reward, not the game or what the policy sees (:func:`llm_gym.envs.catalog.reward_only_args`)."""

    def __init__(
        self,
        game: str = "breakout",
        *,
        frameskip: int = 4,
        repeat_action_probability: float = 0.25,
        full_action_space: bool = False,
        max_num_frames_per_episode: int | None = 108_000,
        reward_shaping: float = 0.0,
        shaping_gamma: float = 0.99,
        shaping_per_ball: bool = False,
        render_mode: str | None = None,
        rows: int = 24,
        cols: int = 80,
        fire_on_reset: bool = False,
        terminal_on_life_loss: bool = False,
    ) -> None:
        if game not in GAMES:
            raise UnknownNameError("Atari game", game, GAMES)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        _check_emulator_settings(frameskip, repeat_action_probability, max_num_frames_per_episode)
        flags = (
            ("fire_on_reset", fire_on_reset), ("terminal_on_life_loss", terminal_on_life_loss),
            ("shaping_per_ball", shaping_per_ball),
        )  # fmt: skip
        for name, value in flags:
            if type(value) is not bool:
                raise ConfigError(f"{name} must be true or false, got {value!r}")
        self.game = GAMES[game](rows, cols)
        self.render_mode = render_mode
        self.reward_shaping = float(reward_shaping)
        self.shaping_gamma = float(shaping_gamma)
        self.shaping_per_ball = shaping_per_ball
        self._ale_env = AtariEnv(
            game,
            obs_type="ram",
            frameskip=frameskip,
            repeat_action_probability=repeat_action_probability,
            full_action_space=full_action_space,
            max_num_frames_per_episode=max_num_frames_per_episode,
        )
        self.ale = self._ale_env.ale
        self._ale_actions = self._ale_env._action_set  # ALE's action values behind our ids (ale-py has no getter)
        self._sticky = float(repeat_action_probability) > 0.0
        ale_names = self._ale_env.get_action_meanings()
        self.ale_action_names: tuple[str, ...] = tuple(ale_names)
        self.action_space = gym.spaces.Discrete(len(ale_names))
        self._num_actions = len(ale_names)
        self.action_names: tuple[str, ...] = tuple(self.game.action_labels.get(n, n) for n in ale_names)
        self.action_aliases: dict[str, int] = {n: i for i, n in enumerate(ale_names) if n not in self.action_names}
        self.legal_actions: tuple[int, ...] = tuple(range(len(ale_names)))
        self.noop_action = ale_names.index("NOOP")
        if fire_on_reset and "FIRE" not in ale_names:
            raise ConfigError(f"fire_on_reset needs FIRE in the action set; {game} has {', '.join(ale_names)}")
        self.fire_on_reset, self.terminal_on_life_loss = fire_on_reset, terminal_on_life_loss
        self._fire = ale_names.index("FIRE") if fire_on_reset else -1
        self._continue_game = False
        self._last_action = self.noop_action
        self._mask = np.ones(len(ale_names), dtype=np.int8)
        self._mask.setflags(write=False)
        self._actions_line = "actions: " + ", ".join(f"{i} {n}" for i, n in enumerate(self.action_names))
        self.instructions: str = self.game.instructions
        self._tasks = [(m, d) for m in self.ale.getAvailableModes() for d in self.ale.getAvailableDifficulties()]
        self.task_id = 0
        self._state: Any = None
        self._potential: float | None = 0.0  # phi of the last state; None: no ball in play (shaping_per_ball)

    # -- the gymnasium API -------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        options = reset_options(self, seed, options)
        task_id = int_option(self, options, "task_id", 0, len(self._tasks) - 1, " (game mode x difficulty)")
        new_game = options.get("new_game", False)
        if type(new_game) is not bool:
            raise EnvInputError(f"{env_name(self)}: new_game must be True or False; got {new_game!r}")
        if self._continue_game and not new_game:
            return self._next_life()
        super().reset(seed=seed)
        self._continue_game = False
        self.task_id = self.task_id if task_id is None else task_id
        ram, ale_info = self._ale_env.reset(seed=seed)
        self._last_action = self.noop_action
        if self.task_id:
            mode, difficulty = self._tasks[self.task_id]
            self.ale.setMode(mode)
            self.ale.setDifficulty(difficulty)
            self.ale.reset_game()
            ram = self.ale.getRAM()
        return self._start_life(ram, ale_info)

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        lives, self._last_action = self.ale.lives(), action_id(self, action, self._num_actions)
        ram, raw, terminated, truncated, ale_info = self._ale_env.step(self._last_action)
        self._state = self.game.read(ram, self._state)
        life_lost = ale_info["lives"] < lives
        if life_lost and not (terminated or truncated):
            if self.terminal_on_life_loss:
                terminated = self._continue_game = True
            elif self.fire_on_reset:
                ram, served, terminated, truncated, ale_info = self._serve(ram, ale_info)
                raw += served
        reward = raw + (self._shaping_term(terminated, life_lost) if self.reward_shaping else 0.0)
        return self._observe(self._state), reward, terminated, truncated, self._info(self._state, raw, reward, ale_info)

    def _shaping_term(self, terminated: bool, life_lost: bool) -> float:
        """``coef * (gamma * phi(s') - phi(s))`` for the step just taken, and remember ``phi(s')``."""
        if not self.shaping_per_ball:
            potential = 0.0 if terminated else self.game.potential(self._state)
            term = self.reward_shaping * (self.shaping_gamma * potential - self._potential)
            self._potential = potential
            return term
        previous, self._potential = self._potential, self._flight_potential(terminated)
        if previous is None or self._potential is None or life_lost:  # a ball served, lost, or none in play
            return 0.0
        return self.reward_shaping * (self.shaping_gamma * self._potential - previous)

    def _flight_potential(self, terminated: bool = False) -> float | None:
        """``phi`` of the state now under ``shaping_per_ball``: None when no ball is in play or the episode ended."""
        if terminated or not self.game.ball_in_play(self._state):
            return None
        return self.game.potential(self._state)

    def _serve(self, ram: np.ndarray, ale_info: dict[str, Any]) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Press FIRE (``fire_on_reset``) until the game no longer waits for a serve, at most
        :data:`MAX_SERVE_PRESSES` times; the presses' RAM, summed reward, end flags and info."""
        total, terminated, truncated = 0.0, False, False
        self._last_action = self._fire
        for _ in range(MAX_SERVE_PRESSES):
            ram, raw, terminated, truncated, ale_info = self._ale_env.step(self._fire)
            self._state = self.game.read(ram, self._state)
            total += raw
            if terminated or truncated or not self.game.awaits_serve(self._state):
                break
        return ram, total, terminated, truncated, ale_info

    def _next_life(self) -> tuple[Any, dict[str, Any]]:
        """``reset`` after an episode that a life loss ended: the same game goes on (EpisodicLifeEnv)."""
        self._continue_game = False
        ram = self.ale.getRAM()
        ale_info = {"lives": self.ale.lives(), "episode_frame_number": self.ale.getEpisodeFrameNumber()}
        return self._start_life(ram, ale_info)

    def _start_life(self, ram: np.ndarray, ale_info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The first observation of a new game or of the next life: decode, serve (``fire_on_reset``), reset the
        shaping potential."""
        self._state = self.game.read(ram, None)
        raw = 0.0
        if self.fire_on_reset:
            ram, raw, _, _, ale_info = self._serve(ram, ale_info)
        self._potential = self._flight_potential() if self.shaping_per_ball else self.game.potential(self._state)
        return self._observe(self._state), self._info(self._state, raw, raw, ale_info)

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self.ale.getScreenRGB()
        if self.render_mode == "ansi":
            return self.game.draw(self._state)
        return None

    def close(self) -> None:
        self._ale_env.close()

    # -- what a mode provides ----------------------------------------------------------------------------------

    def _observe(self, state: Any) -> Any:
        raise NotImplementedError

    def describe(self, state: Any) -> str:
        """The text description of ``state`` followed by the legal actions (what the text view shows)."""
        return f"{self.game.describe(state)}\n{self._actions_line}"

    # -- extras for agents -------------------------------------------------------------------------------------

    @property
    def ram(self) -> np.ndarray:
        """The console's 128 bytes of RAM now (a copy)."""
        return self.ale.getRAM().copy()

    @property
    def game_state(self) -> Any:
        """The decoded game state after the last reset or step."""
        return self._state

    def clone_state(self) -> AtariSnapshot:
        """Snapshot the emulator (RNG included) so a different action can be tried from here."""
        return AtariSnapshot(
            self.ale.cloneState(include_rng=True), self._state, self._potential, self.task_id, self._continue_game,
            self._last_action,
        )  # fmt: skip

    def restore_state(self, snapshot: AtariSnapshot) -> None:
        """Return to a snapshot taken with :meth:`clone_state`."""
        self._last_action = getattr(snapshot, "last_action", self.noop_action)  # older snapshots lack the field
        self.ale.restoreState(snapshot.ale_state)
        if self._sticky:  # prime the action sticky actions repeat (STICKY_PRIMING_FRAMES)
            action = self._ale_actions[self._last_action]
            for _ in range(STICKY_PRIMING_FRAMES):
                self.ale.act(action, 1.0)
            self.ale.restoreState(snapshot.ale_state)
        self._state, self._potential, self.task_id = snapshot.game_state, snapshot.potential, snapshot.task_id
        self._continue_game = getattr(snapshot, "continue_game", False)  # snapshots saved before the field existed

    @property
    def num_tasks(self) -> int:
        """How many task ids this game has (game mode x difficulty)."""
        return len(self._tasks)

    def _info(self, state: Any, raw: float, reward: float, ale_info: dict[str, Any]) -> dict[str, Any]:
        return {
            "legal_actions": self.legal_actions,
            "action_names": self.action_names,
            "action_mask": self._mask.copy(),
            "raw_reward": raw,
            "shaped_reward": reward,
            "score": self.game.score(state),
            "lives": ale_info["lives"],
            "game_over": self.ale.game_over(with_truncation=False),
            "episode_frame_number": ale_info["episode_frame_number"],
            "task_id": self.task_id,
            "game_state": state,
        }


def _check_emulator_settings(frameskip: Any, repeat_action_probability: Any, max_frames: Any) -> None:
    """ALE takes out-of-range settings silently (a sticky-action probability of 2 acts as 1): refuse them here."""
    bounds = frameskip if isinstance(frameskip, tuple) and len(frameskip) == 2 else (frameskip,)
    if any(type(f) is not int or f < 1 for f in bounds):  # ALE also takes (low, high): a random skip per step
        raise ConfigError(f"frameskip must be an int >= 1 (emulator frames per step), got {frameskip!r}")
    if isinstance(repeat_action_probability, bool) or not isinstance(repeat_action_probability, (int, float)):
        raise ConfigError(f"repeat_action_probability must be a number in 0..1, got {repeat_action_probability!r}")
    if not 0.0 <= float(repeat_action_probability) <= 1.0:
        raise ConfigError(f"repeat_action_probability must be in 0..1, got {repeat_action_probability!r}")
    if max_frames is not None and (type(max_frames) is not int or max_frames < 1):
        raise ConfigError(f"max_num_frames_per_episode must be None or an int >= 1, got {max_frames!r}")
