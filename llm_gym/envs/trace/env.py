"""``Trace-v0``: read a Python program with injected ``__DBG_N__`` prints, answer with its exact stdout.

One step per episode. The observation is the program (and its stdin, if any); the action is the model's text;
the reward is 1.0 for an exact match (see :mod:`llm_gym.envs.trace.scoring`) or, with ``scoring="partial"``, the
fraction of expected lines reproduced in order.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import gymnasium as gym

from llm_gym.envs.inputs import env_name, int_option, reset_options
from llm_gym.envs.spaces import TEXT_CHARSET, text_space
from llm_gym.envs.trace.generator import LEVELS
from llm_gym.envs.trace.sandbox import ForkServerSandbox, SandboxLimits, shared_sandbox
from llm_gym.envs.trace.scoring import SCORING_MODES, score
from llm_gym.envs.trace.tasks import (
    GroundTruthCache,
    Task,
    TaskOptions,
    dataset_task,
    default_cache,
    generated_task,
    load_dataset,
)
from llm_gym.errors import ConfigError, EnvInputError

INSTRUCTIONS = """\
You are given a Python 3 program. Predict exactly what it prints to standard output when run (with the given \
standard input, if any).
Some lines were added to trace it: print('__DBG_1__', 'x=' + __dbg__(x), ...). Each prints its tag and then \
name=value pairs separated by single spaces; __dbg__ gives repr() of an int, float, str, bool or None \
(strings keep their quotes) and the type name of anything else (list, dict, Counter, ...).
Write every line the program prints, in order, debug lines included, and nothing else. Put the output in one \
fenced block:
```output
...
```
Scoring: exact match after trimming trailing spaces and blank lines at the start and end."""

_MAX_SKIPS = 200


class TraceEnv(gym.Env[str, str]):
    """Predict a program's stdout.

    Args:
        level: 1-4 (see :mod:`llm_gym.envs.trace.generator`), or None to take ``1 + task_id % 4``; a reset
            option ``level`` overrides it. Ignored with a ``dataset``.
        dataset: a JSONL file of ``{"program": str, "inputs": str | [str]}`` rows to use instead of generated
            programs; the task id is the row index.
        scoring: ``exact`` (1.0 or 0.0), ``partial`` (fraction of expected lines reproduced in order) or
            ``affinetes`` (1.0 or 0.0 by affinetes' rule: whitespace and case ignored, first fenced block).
        max_prints: most debug prints injected per program (0 shows programs unchanged).
        inject_dataset: inject debug prints into data set programs too.
        on_invalid: what a reset does with a task whose program fails in the sandbox (error, timeout, a limit,
            ...): ``skip`` moves on to the next task id (recorded in ``info["skipped"]``); ``mark`` serves it with
            ``info["valid"] = False`` and every answer scores 0.
        limits: sandbox limits for each program run.
        cache_dir: also keep ground truth on disk here, shared across processes.
        max_program_chars: longest program (plus stdin) shown; longer data set rows are invalid.
        max_answer_chars: ``max_length`` of the Text action space (longer answers are still scored).
        render_mode: ``ansi`` renders the program and, after the step, the diff.
        sandbox: a :class:`ForkServerSandbox` of its own (default: the one every env of the process shares).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    reward_only_args: ClassVar[frozenset[str]] = frozenset({"scoring"})
    """Arguments that change only the reward, not the task or what the policy sees (:func:`llm_gym.envs.catalog.reward_only_args`)."""

    def __init__(
        self,
        level: int | None = None,
        *,
        dataset: str | os.PathLike | None = None,
        scoring: str = "exact",
        max_prints: int = 4,
        inject_dataset: bool = True,
        on_invalid: str = "skip",
        limits: SandboxLimits | None = None,
        cache_dir: str | os.PathLike | None = None,
        max_program_chars: int = 8000,
        max_answer_chars: int = 4000,
        render_mode: str | None = None,
        sandbox: ForkServerSandbox | None = None,
    ) -> None:
        if level is not None and level not in LEVELS:
            raise ConfigError(f"Trace level must be one of {LEVELS} or None (mixed), got {level!r}")
        if scoring not in SCORING_MODES:
            raise ConfigError(f"Trace scoring must be one of {SCORING_MODES}, got {scoring!r}")
        if on_invalid not in ("skip", "mark"):
            raise ConfigError(f"on_invalid must be 'skip' or 'mark', got {on_invalid!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be 'ansi' or None, got {render_mode!r}")
        self.level, self.scoring, self.on_invalid, self.render_mode = level, scoring, on_invalid, render_mode
        self.dataset = load_dataset(dataset) if dataset is not None else None
        self.dataset_path = str(dataset) if dataset is not None else None
        self.options = TaskOptions(
            max_prints=max_prints,
            max_program_chars=max_program_chars,
            limits=limits or SandboxLimits(),
            inject_dataset=inject_dataset,
        )
        self.cache = GroundTruthCache(cache_dir) if cache_dir else default_cache()
        self._sandbox = sandbox
        self.instructions: str = (
            INSTRUCTIONS
            if scoring != "affinetes"
            else INSTRUCTIONS.replace(
                "exact match after trimming trailing spaces and blank lines at the start and end",
                "exact match of the first fenced block, ignoring all whitespace and letter case",
            )
        )
        """The rules, for a system prompt (the same attribute on every llm-gym env)."""
        self.observation_space = text_space(max_program_chars + 200)
        self.action_space = gym.spaces.Text(max_length=max_answer_chars, min_length=0, charset=TEXT_CHARSET)
        self.task: Task | None = None
        self._observation = ""
        self._last: dict[str, Any] = {}
        self._done = True

    @property
    def sandbox(self) -> ForkServerSandbox:
        return self._sandbox or shared_sandbox()

    # -- the gymnasium API -------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        options = reset_options(self, seed, options)
        size = len(self.dataset) if self.dataset is not None else 2**31 - 1
        given_task_id = int_option(self, options, "task_id", 0, size - 1)
        level = int_option(self, options, "level", LEVELS[0], LEVELS[-1])
        super().reset(seed=seed)
        self.task, self._done, self._last = None, True, {}  # a failure below leaves "reset needed", nothing stale
        task_id = int(self.np_random.integers(size)) if given_task_id is None else given_task_id
        level = self.level if level is None else level
        if self.dataset is None and level is None:
            level = 1 + task_id % len(LEVELS)
        skipped: list[tuple[int, str]] = []
        task = self._task(task_id, level)
        while not task.valid and self.on_invalid == "skip":
            skipped.append((task.task_id, task.invalid_reason or f"{task.status}: {task.detail}"))
            if len(skipped) >= min(_MAX_SKIPS, size):
                raise ConfigError(f"Trace: {len(skipped)} tasks in a row are invalid; last: {skipped[-1][1]}")
            task = self._task((task.task_id + 1) % size, level)
        self.task, self._done, self._last = task, False, {}
        self._observation = self._render_task(task)
        info = {**self._task_info(task), "skipped": skipped}
        return self._observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.task is None or self._done:
            raise RuntimeError("Trace episodes are one step long: call reset() before step()")
        if not isinstance(action, str):
            raise EnvInputError(f"{env_name(self)} takes the predicted output as a str; got {type(action).__name__}")
        self._done = True
        result = score(action, self.task.expected)
        reward = result.reward(self.scoring) if self.task.valid else 0.0
        info = {
            **self._task_info(self.task),
            "expected": self.task.expected,
            "answer": result.answer,
            "diff": result.diff,
            "exact": result.exact and self.task.valid,
            "partial": result.partial if self.task.valid else 0.0,
            "affinetes": result.affinetes and self.task.valid,
            "scoring_cut": result.cut,
        }
        self._last = info
        return self._observation, float(reward), True, False, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        text = self._observation
        if self._last:
            text += f"\n--- reward {float(self._last['exact'])} (partial {self._last['partial']:.2f})\n"
            text += self._last["diff"] or "exact match"
        return text

    def close(self) -> None:
        pass  # the fork server is shared by every env of the process and stops at exit

    # -- helpers -----------------------------------------------------------------------------------------------

    def _task(self, task_id: int, level: int | None) -> Task:
        if self.dataset is not None:
            return dataset_task(task_id, self.dataset[task_id], self.options, self.sandbox, self.cache)
        return generated_task(task_id, level, self.options, self.sandbox, self.cache)

    @staticmethod
    def _render_task(task: Task) -> str:
        text = f"Program:\n```python\n{task.program.rstrip()}\n```\n"
        if task.stdin:
            text += f"Standard input:\n```\n{task.stdin.rstrip()}\n```\n"
        return text + "What does this program print?"

    def _task_info(self, task: Task) -> dict[str, Any]:
        return {
            "task_id": task.task_id,
            "level": task.level,
            "source": self.dataset_path or "generated",
            "status": task.status,
            "detail": task.invalid_reason or task.detail,
            "valid": task.valid,
            "tags": task.tags,
        }
