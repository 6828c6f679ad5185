"""The one way llm-gym steps many envs: a Gymnasium vector env (sync by default, async where asked) driven by
:class:`EnvStepper`, which evaluation (``llm-gym play``), ``ppo_lora`` and ``nanogpt_ppo`` all use.

The stepper keeps each env's latest observation and info (what a :class:`llm_gym.Policy` acts on), resets an env in
the same step its episode ends (so every step a caller sees is a real decision), numbers episodes in the order they
start (episode ``k`` resets with seed ``seed + k``, so results do not depend on ``num_envs``) and reports each
finished episode with the statistics :class:`llm_gym.envs.wrappers.EpisodeStatistics` counted. The next episode's
reset options come from a task sampler where one is given (and its statistics go back to it), else from
``task_ids``. ``state_dict`` / ``load_state_dict`` carry all of it, env snapshots included, for an exact resume.

With ``group_size=G`` the envs play in groups (what the critic-free advantage estimators of :mod:`llm_gym.rl.advantages`
compare): envs ``gG .. gG+G-1`` play their episodes together, each group of episodes reset with one seed and one
set of reset options, so the G episodes of a group start from the identical state. An env whose episode ended is
reset at once into its envs' next group (the first of them to finish draws it) and waits there, idle, until the
rest have finished too; then all G start. Group ``j`` resets with seed ``seed + j``; its episodes are numbered
``jG .. jG+G-1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import iterate

from llm_gym.envs.snapshots import can_store, capture, restore
from llm_gym.envs.tasks import TaskSampler
from llm_gym.envs.wrappers import (
    BOX_KEY,
    EPISODE_KEY,
    IDLE_ACTION,
    IDLE_TEXT,
    EpisodeStats,
)
from llm_gym.vector import VectorKind, make_vector_env  # noqa: F401  (importers take it from here too)


@dataclass
class Episode:
    """A finished episode."""

    index: int
    """Its number, in the order episodes started."""
    seed: int
    options: dict[str, Any] | None
    """The reset options it was played with (task id, opponent, ...)."""
    stats: EpisodeStats
    final_info: dict[str, Any] = field(repr=False)
    slot: int
    """Which env played it."""


@dataclass
class Transition:
    """What one step of all envs returned."""

    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    raw_rewards: np.ndarray
    """The game's own reward of each env (``info["raw_reward"]``, else the reward)."""
    invalid: np.ndarray
    """Whether each env's action named no legal action."""
    final_observations: dict[int, Any]
    """The last observation of each env whose episode was truncated this step (for bootstrapping its value)."""
    finished: list[Episode]
    """Episodes that ended this step (that the stepper was asked to play)."""
    final_infos: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The last info of each env in ``final_observations`` (its prompt may need more than the observation: the
    episode's earlier turns with ``history=K``, a task's own rules)."""


@dataclass
class SpreadReport:
    """What :meth:`EnvStepper.spread` played."""

    steps: list[int]
    """Random steps each env played."""
    episodes_ended: int = 0
    """Episodes that ended during them (restarted, not reported)."""


class EnvStepper:
    """Steps a vector env from :func:`make_vector_env` for a policy.

    Args:
        envs: the vector env.
        seed: episode ``k`` resets with ``seed + k``.
        episodes: play this many episodes, then let envs idle (their steps are taken but not reported; ``active``
            lists the envs still playing). None: play on forever (training).
        task_ids: reset options ``{"task_id": task_ids[k % len]}`` for episode ``k``.
        sampler: gives each episode's reset options and gets its statistics back (takes precedence over
            ``task_ids``).
        group_size: play in groups of this many envs that start each episode from one seed and one set of options
            (the module's docstring); 1: every env on its own.
    """

    def __init__(
        self,
        envs: VectorEnv,
        *,
        seed: int = 0,
        episodes: int | None = None,
        task_ids: Sequence[int] | None = None,
        sampler: TaskSampler | None = None,
        group_size: int = 1,
    ) -> None:
        self.envs, self.seed, self.episodes = envs, seed, episodes
        self.task_ids, self.sampler = task_ids, sampler
        n = envs.num_envs
        if group_size < 1 or n % group_size:
            raise ValueError(f"group_size must divide the number of envs ({n}), got {group_size}")
        self.group_size = group_size
        self.observations: list[Any] = [None] * n
        self.infos: list[dict[str, Any]] = [{} for _ in range(n)]
        self.episode_index: list[int | None] = [None] * n
        """The episode each env plays (None: idling after the last episode)."""
        self.options: list[dict[str, Any] | None] = [None] * n
        self.next_episode = 0
        self._started = False
        # Groups: per group of envs (its first env), the next group drawn while some of its envs still play
        # (first episode, seed, options, the envs already reset into it); and those envs' episode numbers.
        self._pending: dict[int, tuple[int, int, dict[str, Any] | None, set[int]]] = {}
        self._parked: dict[int, int] = {}
        self.not_reported: set[int] = set()  # episodes the sampler is not told of (branched: returns from there)
        self.on_group_start: Callable[[list[int]], None] | None = None
        """Called with a group's envs as they start together (after their reset): it may move them elsewhere, as
        :class:`llm_gym.training.branches.Branches` does, setting their ``observations`` and ``infos``."""

    def __len__(self) -> int:
        return self.envs.num_envs

    @property
    def active(self) -> list[int]:
        """The envs playing an episode that will be reported."""
        return [i for i, index in enumerate(self.episode_index) if index is not None]

    @property
    def done(self) -> bool:
        """Every asked-for episode has finished."""
        return not self.active

    def reset(self) -> None:
        """Start an episode in every env."""
        self._reset(np.ones(len(self), dtype=bool))

    def step(self, actions: Sequence[Any]) -> Transition:
        """Step every env (idle ones sit the step out), report finished episodes and reset their envs (in groups:
        an env waits for the rest of its group, which then restarts together)."""
        n = len(self)
        if len(actions) != n:
            actions = self._fill(actions)
        obs, rewards, terminated, truncated, vector_info = self.envs.step(_batch(self.envs, actions))
        observations, infos = list(iterate(self.envs.observation_space, obs)), _unbox(vector_info, n)
        ended = terminated | truncated
        result = Transition(
            rewards=np.asarray(rewards, dtype=np.float64),
            terminated=np.asarray(terminated, dtype=bool),
            truncated=np.asarray(truncated, dtype=bool),
            raw_rewards=np.array([float(infos[i].get("raw_reward", rewards[i])) for i in range(n)]),
            invalid=np.array([bool(infos[i].get("invalid_action", False)) for i in range(n)]),
            final_observations={},
            finished=[],
        )
        for i in range(n):
            self.observations[i], self.infos[i] = observations[i], infos[i]
            if not ended[i]:
                continue
            if truncated[i] and not terminated[i]:
                result.final_observations[i] = observations[i]
                result.final_infos[i] = infos[i]
            index = self.episode_index[i]
            if index is None:
                continue
            stats = EpisodeStats(**infos[i][EPISODE_KEY])
            result.finished.append(Episode(index, self.episode_seed(index), self.options[i], stats, infos[i], i))
            if self.sampler is not None and index not in self.not_reported:
                report = stats.report()
                if "success" in infos[i]:  # the env's own verdict (OpenSpiel) beats the sampler's rule of thumb
                    report["success"] = float(infos[i]["success"])
                self.sampler.report(self.options[i], report)
            self.not_reported.discard(index)
        if ended.any():
            self._reset(np.asarray(ended, dtype=bool))
        return result

    def episode_seed(self, index: int) -> int:
        """The seed episode ``index`` resets with: ``seed + index``, or in groups its group's, ``seed + index // G``."""
        return self.seed + index // self.group_size

    def spread(self, max_steps: int, rng: np.random.Generator) -> SpreadReport:
        """Spread the envs over their games before training's first rollout: env ``i`` plays a uniform draw of
        0..``max_steps`` steps of uniformly random legal actions (from its info's ``legal_actions``), the others
        sitting the steps out. Why: a stepper resets every env at once, so without this a first rollout holds
        nothing but game openings, and on Breakout that teaches the first update the opening's lesson only
        (``docs/results/ppo_lora_breakout.md``, "a run's first rollout is all game openings"). Episodes that end meanwhile
        restart as usual and are not reported; no task sampler may be attached (random play would feed it)."""
        if self.sampler is not None:
            raise ValueError("a task sampler is attached, and random play would report to it")
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, got {max_steps}")
        n = len(self)
        remaining = rng.integers(max_steps + 1, size=n)
        report = SpreadReport(steps=remaining.tolist())
        text = isinstance(self.envs.single_action_space, gym.spaces.Text)
        while remaining.any():
            actions: list[Any] = [IDLE_TEXT if text else IDLE_ACTION] * n
            for i in np.flatnonzero(remaining):
                info = self.infos[i]
                if not info.get("legal_actions"):
                    raise ValueError("the env lists no legal actions in its info (legal_actions), so none can be drawn")
                j = int(rng.integers(len(info["legal_actions"])))
                actions[i] = str(info["action_names"][j]) if text else int(info["legal_actions"][j])
            result = self.step(actions)
            report.episodes_ended += int((result.terminated | result.truncated)[remaining > 0].sum())
            remaining = np.maximum(remaining - 1, 0)
        return report

    # -- exact resume ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where every env stands: snapshots (None where the envs take none, or where no episode is in play),
        observations, infos, episode numbers, the sampler's state."""
        # A copy of the list: a step replaces its entries, and a caller may hold a state across steps.
        infos = list(self.infos) if can_store(self.infos) else [_policy_info(i) for i in self.infos]
        in_play = bool(self.active or self._pending)
        return {
            # Between rollouts of groups nothing is in play: no env's state is worth keeping.
            "snapshots": capture(self.envs) if in_play else None,
            "observations": list(self.observations),
            "infos": infos,
            "episode_index": list(self.episode_index),
            "options": list(self.options),
            "next_episode": self.next_episode,
            "sampler": self.sampler.state_dict() if self.sampler is not None else None,
            "pending_groups": [[first, *group[:3], sorted(group[3])] for first, group in self._pending.items()],
            "parked": [[slot, index] for slot, index in self._parked.items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> bool:
        """Continue from :meth:`state_dict`. Returns False where the envs had no snapshot: they then start new
        episodes, numbered on from where the saved run stood."""
        self.next_episode = int(state["next_episode"])
        self._pending = {int(f): (int(a), int(b), o, set(r)) for f, a, b, o, r in state.get("pending_groups", ())}
        self._parked = {int(slot): int(index) for slot, index in state.get("parked", ())}
        if self.sampler is not None and state.get("sampler") is not None:
            self.sampler.load_state_dict(state["sampler"])
        in_play = any(index is not None for index in state["episode_index"]) or bool(self._pending)
        if state["snapshots"] is None and not in_play:
            return False  # nothing was in play: the next reset() starts from here, as the saved run would have
        if state["snapshots"] is None:
            # New games; with a sampler, of the tasks that were in progress (it handed them out and waits for
            # their reports), so its bookkeeping stays right.
            saved = list(state["options"]) if self.sampler is not None else [None] * len(self)
            self._reset(np.ones(len(self), dtype=bool), restart=saved)
            return False
        self.envs.reset(seed=[self.seed + i for i in range(len(self))])  # set up wrappers; the snapshot overrides
        self._started = True
        restore(self.envs, state["snapshots"])
        self.observations = list(state["observations"])
        self.infos = [dict(i) for i in state["infos"]]
        self.episode_index, self.options = list(state["episode_index"]), list(state["options"])
        return True

    def close(self) -> None:
        self.envs.close()

    # -- helpers -----------------------------------------------------------------------------------------------

    def _reset(self, mask: np.ndarray, restart: Sequence[dict[str, Any] | None] | None = None) -> None:
        """Start new episodes in the envs of ``mask`` (whole groups, in groups); ``restart[i]``, where given, replays
        env i's options."""
        n = len(self)
        if self.group_size > 1:
            plans = {int(i): self._plan_in_group(int(i), restart) for i in np.flatnonzero(mask)}
        else:
            plans = {int(i): self._plan_episode(None if restart is None else restart[i]) for i in np.flatnonzero(mask)}
        first_options = next(iter(plans.values()))[2]
        if len(plans) == n and all(options == first_options for _, _, options in plans.values()):
            # One call for all (the first reset, or every env ending at once with the same options).
            seeds = [plans[i][1] for i in range(n)]
            obs, vector_info = self.envs.reset(seed=seeds, options=dict(first_options or {}) or None)
            self._store(list(plans), obs, vector_info, plans)
            if self.group_size > 1:
                self._start_complete_groups(plans)
            return
        if not self._started:  # Gymnasium batches every env's latest observation, so each needs one first
            self.envs.reset(seed=[self.seed + i for i in range(n)])
        # Otherwise one call per set of options (a group's envs, or envs that ended together with the same ones):
        # one Gymnasium reset gives every env its own seed but one set of options.
        batches: list[tuple[dict[str, Any] | None, list[int]]] = []
        for i, (_, _, options) in plans.items():
            same = next((slots for known, slots in batches if known == options), None)
            if same is None:
                batches.append((options, [i]))
            else:
                same.append(i)
        for options, slots in batches:
            only = np.zeros(n, dtype=bool)
            only[slots] = True
            seeds: list[int | None] = [None] * n
            for i in slots:
                seeds[i] = plans[i][1]
            obs, vector_info = self.envs.reset(seed=seeds, options={**(options or {}), "reset_mask": only})
            self._store(slots, obs, vector_info, plans)
        if self.group_size > 1:
            self._start_complete_groups(plans)

    def _plan_episode(
        self, options: dict[str, Any] | None = None
    ) -> tuple[int | None, int | None, dict[str, Any] | None]:
        """(episode number, seed, reset options) of the next episode an env starts (``options``, where given, instead
        of new ones); Nones once all are played."""
        if self.episodes is not None and self.next_episode >= self.episodes:
            return None, None, None
        index = self.next_episode
        self.next_episode += 1
        return index, self.seed + index, options if options is not None else self._next_options(index)

    def _plan_in_group(
        self, slot: int, restart: Sequence[dict[str, Any] | None] | None
    ) -> tuple[int | None, int | None, dict[str, Any] | None]:
        """The plan of env ``slot``'s next episode in groups: its envs' next group (drawn by the first of them to ask:
        one seed, one draw of options; ``restart[slot]``, where given, replays options), member ``slot % G`` of it;
        Nones once all are played (a group is drawn whole or not at all)."""
        first = slot - slot % self.group_size
        group = self._pending.get(first)
        if group is None:
            if self.episodes is not None and self.next_episode >= self.episodes:
                return None, None, None
            start = self.next_episode
            self.next_episode += self.group_size
            options = restart[slot] if restart is not None and restart[slot] is not None else None
            options = options if options is not None else self._next_options(start // self.group_size)
            group = self._pending[first] = (start, self.episode_seed(start), options, set())
        start, seed, options, ready = group
        ready.add(slot)
        return start + slot % self.group_size, seed, options

    def _start_complete_groups(self, plans: Mapping[int, tuple]) -> None:
        """Envs just reset into a group wait, idle, until every env of the group is in it; then all start."""
        for slot, (index, _, _) in plans.items():
            if index is not None:
                self.episode_index[slot] = None
                self._parked[slot] = index
        for first, (_, _, _, ready) in list(self._pending.items()):
            if len(ready) == self.group_size:
                for slot in range(first, first + self.group_size):
                    self.episode_index[slot] = self._parked.pop(slot)
                del self._pending[first]
                if self.on_group_start is not None:
                    self.on_group_start(list(range(first, first + self.group_size)))

    def _store(self, slots: list[int], obs: Any, vector_info: Mapping[str, Any], plans: Mapping[int, tuple]) -> None:
        self._started = True
        observations, infos = list(iterate(self.envs.observation_space, obs)), _unbox(vector_info, len(self))
        for i in slots:
            self.observations[i], self.infos[i] = observations[i], infos[i]
            self.episode_index[i], self.options[i] = plans[i][0], plans[i][2]

    def _next_options(self, index: int) -> dict[str, Any] | None:
        if self.sampler is not None:
            return self.sampler.next_options()
        if self.task_ids:
            return {"task_id": int(self.task_ids[index % len(self.task_ids)])}
        return None

    def _fill(self, actions: Sequence[Any]) -> list[Any]:
        """Actions for the active envs -> actions for all, idle envs sitting the step out."""
        active = self.active
        if len(actions) != len(active):
            raise ValueError(f"expected {len(self)} actions (or {len(active)} for the active envs), got {len(actions)}")
        idle = IDLE_TEXT if isinstance(self.envs.single_action_space, gym.spaces.Text) else IDLE_ACTION
        full: list[Any] = [idle] * len(self)
        for i, action in zip(active, actions, strict=True):
            full[i] = action
        return full


def _batch(envs: VectorEnv, actions: Sequence[Any]) -> Any:
    if isinstance(envs.single_action_space, gym.spaces.Text):
        return tuple(str(a) for a in actions)
    return np.asarray([int(a) for a in actions], dtype=np.int64)


def _unbox(vector_info: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    boxes, present = vector_info.get(BOX_KEY), vector_info.get(f"_{BOX_KEY}")
    if boxes is None:
        return [{} for _ in range(n)]
    return [boxes[i].info if present[i] else {} for i in range(n)]


def _policy_info(info: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("legal_actions", "action_names", "action_mask")
    return {k: info[k] for k in keep if k in info}
