"""Stage tables (``[[stages]]`` in a TOML config) -> :class:`~llm_gym.agents.curriculum.samplers.Stage` objects, checked against the env.

A stage table has ``name``, ``tasks`` (``"first-last"``, ``[first, last]`` or one id), ``threshold`` (success rate
over the window that moves on to the next stage), optionally ``window`` and ``demote_below``, and the reset options
its env family takes: ``opponent`` (``random``/``mcts``), ``mcts`` (a table of MCTS settings) and ``seat`` for
OpenSpiel, ``level`` (1-4) for Trace. Atari stages pick game mode and difficulty through the task id. Every mistake
is one line that names the stage and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_gym.agents.curriculum.samplers import Stage, check_stages
from llm_gym.envs.openspiel.catalog import GAMES, TASK_STRIDE
from llm_gym.envs.openspiel.opponents import MCTSConfig
from llm_gym.envs.tasks import TaskRange
from llm_gym.errors import ConfigError, suggest

STAGE_KEYS = ("name", "tasks", "threshold", "window", "demote_below")
FAMILY_OPTIONS: dict[str, tuple[str, ...]] = {
    "openspiel": ("opponent", "mcts", "seat"),
    "trace": ("level",),
    "atari": (),
}
OPPONENTS = ("random", "mcts")
TRACE_LEVELS = (1, 2, 3, 4)

# The seed's curriculum (OpenSpiel task ids): random opponent on game indexes 0-9, then 10-19, then MCTS on 20-29.
SEED_STAGES: tuple[dict[str, Any], ...] = (
    {"name": "easy", "tasks": "0-999999999", "opponent": "random", "threshold": 0.6},
    {"name": "medium", "tasks": "1000000000-1999999999", "opponent": "random", "threshold": 0.5},
    {"name": "hard", "tasks": "2000000000-2999999999", "opponent": "mcts", "threshold": 0.4},
)
AFFINETES_LAST_ID = 22 * 10**8 - 1
"""Game indexes 22+ are affinetes' games again there (index % 22) and this project's extras here."""


def env_family(env_id: str) -> str:
    if env_id.startswith("OpenSpiel-"):
        return "openspiel"
    if env_id.startswith("Trace-"):
        return "trace"
    return "atari"


def task_id_limit(env_id: str, env_kwargs: Mapping[str, Any]) -> int | None:
    """The largest task id the env accepts, where it is known without building the env."""
    if env_id == "OpenSpiel-v0":
        return None if env_kwargs.get("profile") == "affinetes" else len(GAMES) * TASK_STRIDE - 1
    if env_id.startswith("Trace-") and not env_kwargs.get("dataset"):
        return 2**31 - 2
    return None


def default_stage_tables(env_id: str, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The seed's stages for ``OpenSpiel-v0``. The default profile stops the hard stage at affinetes' last id (its
    indexes 22-29 wrap to affinetes' games there and are this project's extra games here)."""
    if env_id != "OpenSpiel-v0":
        raise ConfigError(
            f"the curriculum's default stages are for OpenSpiel-v0; give {env_id} its own [[stages]] in --config "
            "(see docs/guides/curriculum.md)"
        )
    tables = [dict(t) for t in SEED_STAGES]
    if env_kwargs.get("profile") != "affinetes":
        tables[-1]["tasks"] = f"2000000000-{AFFINETES_LAST_ID}"
    return tables


def parse_stages(
    tables: Sequence[Mapping[str, Any]], env_id: str | None, env_kwargs: Mapping[str, Any], window: int
) -> list[Stage]:
    """Check and build the stages (``window`` is the default window of a stage that names none). Without an env
    id (when the config is read, before any run directory exists) every family's options are accepted."""
    options_allowed = (
        FAMILY_OPTIONS[env_family(env_id)] if env_id else tuple(dict.fromkeys(sum(FAMILY_OPTIONS.values(), ())))
    )
    allowed = (*STAGE_KEYS, *options_allowed)
    limit = task_id_limit(env_id, env_kwargs) if env_id else None
    stages = []
    for index, table in enumerate(tables):
        if not isinstance(table, Mapping):
            raise ConfigError(f"stage {index + 1} must be a table ([[stages]] with key = value lines), got {table!r}")
        name = str(table.get("name", f"stage{index + 1}"))
        where = f"stage {name!r}"
        for key in table:
            if key not in allowed:
                close = suggest(str(key), allowed)
                hint = f"did you mean {', '.join(close)}?" if close else f"stages take {', '.join(allowed)}"
                raise ConfigError(f"{where}: unknown key {key!r}; {hint}")
        if "tasks" not in table:
            raise ConfigError(f'{where} has no task range; add tasks = "first-last"')
        try:
            tasks = TaskRange.parse(table["tasks"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if limit is not None and tasks.last > limit:
            raise ConfigError(f"{where}: task range {tasks} goes past {env_id}'s last task id {limit}; end it there")
        options = {k: table[k] for k in options_allowed if k in table}
        _check_options(where, options)
        try:
            threshold = float(table.get("threshold", 0.5))
            stage_window = int(table.get("window", window))
            demote = table.get("demote_below")
            stages.append(
                Stage(name, tasks, options, threshold, stage_window, None if demote is None else float(demote))
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"{where}: threshold, window and demote_below must be numbers ({exc})") from None
    check_stages(stages)
    return stages


def _check_options(where: str, options: Mapping[str, Any]) -> None:
    opponent = options.get("opponent")
    if opponent is not None and opponent not in OPPONENTS:
        close = suggest(str(opponent), OPPONENTS)
        hint = f"did you mean {close[0]!r}?" if close else "use 'random' or 'mcts'"
        raise ConfigError(f"{where}: unknown opponent {opponent!r}; {hint}")
    if "mcts" in options:
        try:
            MCTSConfig.coerce(options["mcts"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if "level" in options and options["level"] not in TRACE_LEVELS:
        raise ConfigError(f"{where}: Trace level {options['level']!r} does not exist; use one of 1, 2, 3, 4")
    if "seat" in options and not isinstance(options["seat"], int):
        raise ConfigError(f"{where}: seat must be a seat number (0, 1, ...), got {options['seat']!r}")
