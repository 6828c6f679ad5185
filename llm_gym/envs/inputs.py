"""Checks of what a caller hands an env (action ids, reset options, seeds), shared by every env family.

A wrong type, or an id outside the action space, is a bug in the caller, not a move in the game: it raises
:class:`~llm_gym.errors.EnvInputError` naming what is accepted, before the env changes anything, so the env stays
usable. (An id inside the action space that the game does not allow right now is a move, handled by the env's
invalid-action policy.) Python ints and numpy integers are ids; bools, floats, strings and arrays are not, so
``step(1.7)`` or ``step(-1)`` can never play an action by truncation or negative indexing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from llm_gym.errors import EnvInputError


def env_name(env: gym.Env) -> str:
    """The id the env was made with, else its class name (for messages)."""
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else type(env).__name__


def as_int(value: Any) -> int | None:
    """``value`` as an int if it is an integer (Python or numpy, a 0-d integer array included), else None."""
    if type(value) is int:  # the common case first: this runs on every step
        return value
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.shape == () and np.issubdtype(value.dtype, np.integer):
        return int(value)
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def action_id(env: gym.Env, action: Any, n: int, hint: str = "") -> int:
    """``action`` as an id in ``0..n-1``, or :class:`EnvInputError` naming the range (and ``hint``)."""
    value = as_int(action)
    if value is not None and 0 <= value < n:
        return value
    message = f"{env_name(env)} takes an action id, an int in 0..{n - 1}; got {_shown(action)}"
    if isinstance(action, str):
        message += " (to step with text, wrap the env in llm_gym.TextActions)"
    raise EnvInputError(message + hint)


def reset_options(env: gym.Env, seed: Any, options: Any) -> Mapping[str, Any]:
    """Check ``reset``'s arguments as Gymnasium defines them; the options as a mapping (empty for None)."""
    if seed is not None and not (type(seed) is int and seed >= 0):
        raise EnvInputError(f"{env_name(env)}.reset(seed=...) takes None or an int >= 0; got {_shown(seed)}")
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise EnvInputError(
            f"{env_name(env)}.reset(options=...) takes a dict such as {{'task_id': 3}}; got {_shown(options)}"
        )
    return options


def int_option(
    env: gym.Env, options: Mapping[str, Any], key: str, low: int, high: int | None, what: str = ""
) -> int | None:
    """``options[key]`` as an int in ``low..high`` (None when absent), or :class:`EnvInputError` naming the range."""
    if key not in options:
        return None
    value = as_int(options[key])
    if value is None or value < low or (high is not None and value > high):
        valid = f"in {low}..{high}" if high is not None else f">= {low}"
        raise EnvInputError(f"{env_name(env)}: {key} must be an int {valid}{what}; got {_shown(options[key])}")
    return value
