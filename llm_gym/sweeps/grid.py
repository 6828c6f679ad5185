"""A sweep's grid: ``--grid key=v1,v2,...`` options read into typed values of the agent's config fields, and the
cells (one dict of overrides each) of their cross product.

Every value is checked against the agent's config dataclass before anything runs, so a mistyped key or a value of
the wrong type is one line with close matches, not a failure in the tenth run.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_gym.config import apply_overrides, coerce, type_name
from llm_gym.errors import ConfigError, did_you_mean

MAX_RUNS = 10_000
"""Most runs (cells x seeds) one sweep plans: more is a typo (``0-100000000``), refused before any list is built."""

RESERVED = {"seed": "use --seeds 0,1,2 for seeds"}
"""Fields a grid may not vary, with what to use instead."""


@dataclass(frozen=True)
class Cell:
    """One point of the grid: the overrides that make it, in the order the grid named its keys."""

    overrides: tuple[tuple[str, Any], ...]
    """(field, value) pairs, typed as the config field."""

    @property
    def label(self) -> str:
        """``learning_rate=0.0003,target_kl=0.02`` (``default`` for an empty grid); also a directory name."""
        if not self.overrides:
            return "default"
        return ",".join(f"{key}={_show(value)}" for key, value in self.overrides)

    @property
    def slug(self) -> str:
        """:attr:`label` made safe as one directory name."""
        return re.sub(r"[^A-Za-z0-9_.,=+-]", "-", self.label)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.overrides)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "+".join(_show(v) for v in value)
    return str(value)


def parse_grid(items: Sequence[str], config_cls: type) -> dict[str, list[Any]]:
    """``["learning_rate=1e-4,3e-4", "target_kl=0.01,0.02"]`` -> ``{field: [typed values]}``.

    Values are split on commas, or given as a JSON list (``'lora_targets=[["q_proj"], ["q_proj", "v_proj"]]'``)
    where a value holds commas itself. Unknown fields, repeated keys, empty or repeated values and values that are
    not of the field's type raise :class:`ConfigError` (one line, close matches for a field name)."""
    hints = typing.get_type_hints(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--grid expects key=value1,value2,..., got {item!r}")
        if key in RESERVED:
            raise ConfigError(f"--grid {key}: {RESERVED[key]}")
        if key not in names:
            hint = did_you_mean(key, names) or "; see `llm-gym agents` for the fields"
            raise ConfigError(f"--grid: unknown key {key!r} for {config_cls.__name__}{hint}")
        if key in grid:
            raise ConfigError(f"--grid {key} is given twice; put all its values in one --grid {key}=a,b,c")
        raw_values = _split(key, raw.strip())
        values = []
        for value in raw_values:
            try:
                values.append(coerce(value, hints[key]))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"--grid {key}={value!r} is not a valid {type_name(hints[key])} ({exc})") from exc
        shown = [json.dumps(v, default=str) for v in values]
        if len(set(shown)) != len(shown):
            raise ConfigError(f"--grid {key} repeats a value: {raw.strip()}")
        grid[key] = values
    return grid


def _split(key: str, raw: str) -> list[Any]:
    if raw.startswith("["):
        try:
            values = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"--grid {key}: {raw!r} is not a JSON list ({exc})") from exc
        if not isinstance(values, list):
            raise ConfigError(f"--grid {key}: expected a JSON list of values")
    else:
        values = [v.strip() for v in raw.split(",")]
    if not values or any(v == "" for v in values):
        raise ConfigError(f"--grid {key} needs values: --grid {key}=a,b,c, got {raw!r}")
    return values


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` (inclusive) -> seeds, each once, in order (at most :data:`MAX_RUNS`)."""
    seeds: dict[int, None] = {}  # ordered, and a membership test in constant time
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)-(\d+)", part)
        try:
            low, high = (int(match[1]), int(match[2])) if match else (int(part), int(part))
        except ValueError:
            raise ConfigError(f"--seeds expects integers such as 0,1,2 or 0-4, got {text!r}") from None
        if high < low:
            raise ConfigError(f"--seeds range {part!r} is empty")
        if low < 0:
            raise ConfigError(f"--seeds takes seeds >= 0, got {part!r}")
        if high - low + 1 + len(seeds) > MAX_RUNS:
            raise ConfigError(f"--seeds {text!r} names more than {MAX_RUNS:,} seeds; a sweep runs at most {MAX_RUNS:,}")
        seeds.update(dict.fromkeys(range(low, high + 1)))
    return list(seeds)


def check_run_count(grid: Mapping[str, Sequence[Any]], seeds: Sequence[int]) -> None:
    """Refuse a sweep of more than :data:`MAX_RUNS` runs before its cells are built."""
    count = math.prod(len(values) for values in grid.values()) * len(seeds)
    if count > MAX_RUNS:
        raise ConfigError(
            f"the grid and --seeds make {count:,} runs; a sweep runs at most {MAX_RUNS:,}: fewer values or seeds"
        )


def cells(grid: Mapping[str, Sequence[Any]]) -> list[Cell]:
    """The cross product of the grid, first key slowest (one empty cell for an empty grid)."""
    keys = list(grid)
    return [Cell(tuple(zip(keys, combo, strict=True))) for combo in itertools.product(*(grid[k] for k in keys))]


def check_cells(config: Any, grid_cells: Sequence[Cell]) -> None:
    """Build every cell's config from ``config`` (the defaults with ``--set`` applied), so a combination the
    config rejects (a value out of range) is reported before any run starts."""
    for cell in grid_cells:
        apply_overrides(config, cell.as_dict(), source=f"--grid cell {cell.label}")
