"""One check of every number in an agent config, where configs are built (:func:`llm_gym.config.apply_overrides`).

``--set learning_rate=inf`` used to train for minutes into NaN weights, and ``learning_rate=-1`` ended in a torch
traceback with a run directory left behind. Every config of every agent is built by ``apply_overrides`` (defaults,
``--set``, ``--config``, a sweep's grid point, a resumed run's ``config.json``), so checking there refuses a bad
number before anything runs or is written, with one line naming the field, the value and the range.

Two rules:

* **finite** - no float anywhere in a config (tuples and lists included) may be NaN or infinite;
* **in range** - a field declares its range with :func:`in_range` in its ``dataclasses.field`` metadata, or its
  name matches one of :data:`NAME_RANGES`, the conventions every built-in agent follows (``learning_rate`` > 0,
  ``gamma`` and ``*_lambda`` in [0, 1], coefficients and counts >= 0, ...). A declared range wins over a
  convention, so a plugin field that shares a conventional name but means something else declares its own (or
  ``in_range()`` for none).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Iterator, Mapping
from typing import Any

RANGE_KEY = "llm_gym.range"
"""The ``dataclasses.field`` metadata key that holds a field's declared range (see :func:`in_range`)."""

Range = tuple[float | None, float | None, bool]
"""(low, high, low_open): None is unbounded; ``low_open`` excludes ``low`` itself (``> 0`` rather than ``>= 0``)."""

NAME_RANGES: tuple[tuple[str, Range], ...] = (
    ("learning_rate", (0.0, None, True)),
    ("*learning_rate", (0.0, None, False)),
    ("gamma", (0.0, 1.0, False)),
    ("*_gamma", (0.0, 1.0, False)),
    ("*_lambda", (0.0, 1.0, False)),
    ("*dropout", (0.0, 1.0, False)),
    ("*_fraction", (0.0, 1.0, False)),
    ("*_share", (0.0, 1.0, False)),
    ("min_lr_ratio", (0.0, 1.0, False)),
    ("*epsilon", (0.0, 1.0, False)),
    ("adam_beta*", (0.0, 1.0, False)),
    ("*_coef", (0.0, None, False)),
    ("*_coef_max", (0.0, None, False)),
    ("max_grad_norm", (0.0, None, False)),
    ("weight_decay", (0.0, None, False)),
    ("*temperature", (0.0, None, False)),
    ("target_kl", (0.0, None, False)),
    ("kl_target", (0.0, None, False)),
    ("total_steps", (0.0, None, False)),
    ("num_*", (0.0, None, False)),
    ("*_steps", (0.0, None, False)),
    ("*_epochs", (0.0, None, False)),
    ("*_episodes", (0.0, None, False)),
    ("*_every", (0.0, None, False)),
    ("*_size", (0.0, None, False)),
    ("*_tokens", (0.0, None, False)),
    ("threads", (0.0, None, False)),
)
"""``(name pattern, range)`` in order; the first pattern matching a field's name gives its range."""


def in_range(low: float | None = None, high: float | None = None, *, above: float | None = None) -> dict[str, Range]:
    """Field metadata declaring a numeric field's range: ``learning_rate: float = dataclasses.field(default=3e-4,
    metadata=in_range(above=0))``; ``in_range()`` declares no range (only finiteness is checked)."""
    if above is not None:
        return {RANGE_KEY: (above, high, True)}
    return {RANGE_KEY: (low, high, False)}


def field_range(cls: type, field: dataclasses.Field) -> Range | None:
    """The range of ``field`` of config class ``cls``: declared, else by name, else None."""
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__dataclass_fields__", {}).get(field.name)
        if declared is not None and RANGE_KEY in declared.metadata:
            return declared.metadata[RANGE_KEY]
    for pattern, bounds in NAME_RANGES:
        if fnmatch.fnmatchcase(field.name, pattern):
            return bounds
    return None


def number_problems(cls: type, values: Mapping[str, Any]) -> list[str]:
    """One text per field of config class ``cls`` whose value in ``values`` (field name -> value) is not finite or
    not in its range."""
    problems = []
    for field in dataclasses.fields(cls):
        value = values[field.name]
        bounds = field_range(cls, field)
        for number in _numbers(value):
            problem = _problem(number, bounds)
            if problem:
                problems.append(f"{field.name}={_show(value)} {problem}")
                break
    return problems


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _numbers(item)


def _problem(number: float, bounds: Range | None) -> str:
    if isinstance(number, float) and not math.isfinite(number):
        return "is not a finite number"
    if bounds is None:
        return ""
    low, high, low_open = bounds
    if low is not None and (number <= low if low_open else number < low):
        return f"must be {'>' if low_open else '>='} {_show(low)}" + (
            f" and <= {_show(high)}" if high is not None else ""
        )
    if high is not None and number > high:
        return f"must be <= {_show(high)}" + (
            f" and {'>' if low_open else '>='} {_show(low)}" if low is not None else ""
        )
    return ""


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    return repr(value) if not isinstance(value, float) else f"{value:g}"
