"""Env state as data, not code: a JSON encoding of what :mod:`llm_gym.envs.snapshots` and the stepper save.

A checkpoint's env state used to be a pickle, and unpickling a file from a run directory someone else made runs
whatever code they put in it (the manifest's checksums do not help: whoever crafts the file re-hashes it). This
codec writes plain JSON instead; reading it builds nothing but JSON values, tuples, bytes, numpy arrays of plain
dtypes, and instances of the types in :data:`TYPES` (plain dataclasses and named tuples, built from their fields),
named in the file by a short key, never by a module path:

* ``{"$tuple": [...]}``, ``{"$dict": [[key, value], ...]}`` (keys of any encodable type), ``{"$bytes": base64}``;
* ``{"$array": [dtype, shape, base64]}`` (C order; object dtypes are refused) and ``{"$scalar": [dtype, base64]}``;
* ``{"$type": key, "fields": {...}}`` for a registered type; a type with its own byte format (the ALE emulator's
  state) is registered with two functions instead, ``{"$type": key, "bytes": base64}``.

Third-party envs whose snapshots hold types of their own register them with :func:`register`; a snapshot the
codec cannot encode is simply not taken (the run resumes with new episodes, as for envs without snapshots).
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np

FORMAT = "llm-gym-state/1"


class StateCodecError(ValueError):
    """A value the codec cannot write, or a file it will not read."""


@dataclasses.dataclass(frozen=True)
class _Entry:
    where: str
    """``module:qualname`` of the type; imported only when a file names this entry's key."""
    to_bytes: Callable[[Any], bytes] | None = None
    from_bytes: Callable[[bytes], Any] | None = None


def _ale_to_bytes(state: Any) -> bytes:
    return bytes(state.__getstate__())


def _ale_from_bytes(data: bytes) -> Any:
    from ale_py import ALEState  # `import llm_gym` loads this module; ALE waits for an Atari state

    return ALEState(data)


TYPES: dict[str, _Entry] = {
    "EnvSnapshot": _Entry("llm_gym.envs.snapshots:EnvSnapshot"),
    "AtariSnapshot": _Entry("llm_gym.envs.atari.env:AtariSnapshot"),
    "BreakoutState": _Entry("llm_gym.envs.atari.breakout:BreakoutState"),
    "PongState": _Entry("llm_gym.envs.atari.pong:PongState"),
    "ALEState": _Entry("ale_py._ale_py:ALEState", _ale_to_bytes, _ale_from_bytes),
}
"""The types a state file may hold, by the key the file names them with."""
_BY_WHERE = {entry.where: key for key, entry in TYPES.items()}


def register(key: str, cls: type, to_bytes: Callable[[Any], bytes] | None = None,
             from_bytes: Callable[[bytes], Any] | None = None) -> None:  # fmt: skip
    """Allow ``cls`` (a dataclass or a named tuple built from its fields, or any type with ``to_bytes`` /
    ``from_bytes``) in state files under ``key``. For an env plugin whose ``clone_state`` returns its own types."""
    if key in TYPES and TYPES[key].where != _where(cls):
        raise ValueError(f"state type key {key!r} is taken by {TYPES[key].where}")
    TYPES[key] = _Entry(_where(cls), to_bytes, from_bytes)
    _BY_WHERE[_where(cls)] = key


def _where(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def dumps(value: Any) -> str:
    """``value`` as a JSON document (raises :class:`StateCodecError` for anything the codec does not know)."""
    return json.dumps({"format": FORMAT, "value": _encode(value)}, separators=(",", ":"))


def can_encode(value: Any) -> bool:
    try:
        _encode(value)
    except StateCodecError:
        return False
    return True


def loads(text: str | bytes) -> Any:
    """What :func:`dumps` wrote (raises :class:`StateCodecError` for anything else)."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StateCodecError(f"not a state file ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT or "value" not in document:
        raise StateCodecError(f"not a state file (expected format {FORMAT!r})")
    try:
        return _decode(document["value"])
    except StateCodecError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        raise StateCodecError(f"a malformed value ({type(exc).__name__}: {exc})") from exc


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict) and type(value) is dict:
        return {"$dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)) and type(value) in (bytes, bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise StateCodecError("a numpy array of Python objects")
        data = np.ascontiguousarray(value)
        return {"$array": [data.dtype.str, list(data.shape), base64.b64encode(data.tobytes()).decode()]}
    if isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise StateCodecError("a numpy object scalar")
        return {"$scalar": [array.dtype.str, base64.b64encode(array.tobytes()).decode()]}
    key = _BY_WHERE.get(_where(type(value)))
    if key is not None:
        entry = TYPES[key]
        if entry.to_bytes is not None:
            return {"$type": key, "bytes": base64.b64encode(entry.to_bytes(value)).decode()}
        return {"$type": key, "fields": {name: _encode(v) for name, v in _fields(value).items()}}
    if type(value) is tuple:
        return {"$tuple": [_encode(v) for v in value]}
    raise StateCodecError(f"a {type(value).__module__}.{type(value).__qualname__} (not a registered state type)")


def _fields(value: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return dict(zip(value._fields, value, strict=True))
    raise StateCodecError(f"{type(value).__qualname__} is registered but is neither a dataclass nor a named tuple")


def _decode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise StateCodecError(f"an unknown value {str(value)[:60]!r}")
    if "$tuple" in value:
        return tuple(_decode(v) for v in value["$tuple"])
    if "$dict" in value:
        return {_hashable(_decode(k)): _decode(v) for k, v in value["$dict"]}
    if "$bytes" in value:
        return base64.b64decode(value["$bytes"], validate=True)
    if "$array" in value:
        dtype, shape, data = value["$array"]
        dtype = _plain_dtype(dtype)
        shape = tuple(int(n) for n in shape)
        return np.frombuffer(base64.b64decode(data, validate=True), dtype=dtype).reshape(shape).copy()
    if "$scalar" in value:
        dtype, data = value["$scalar"]
        return np.frombuffer(base64.b64decode(data, validate=True), dtype=_plain_dtype(dtype))[0]
    if "$type" in value:
        key = value["$type"]
        entry = TYPES.get(key) if isinstance(key, str) else None
        if entry is None:
            raise StateCodecError(f"an unknown type {str(key)[:60]!r}")
        module, _, qualname = entry.where.partition(":")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if entry.from_bytes is not None:
            return entry.from_bytes(base64.b64decode(value["bytes"], validate=True))
        return cls(**{str(k): _decode(v) for k, v in value["fields"].items()})
    raise StateCodecError(f"an unknown value {str(value)[:60]!r}")


def _plain_dtype(text: Any) -> np.dtype:
    dtype = np.dtype(str(text))
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise StateCodecError(f"an array dtype {text!r} that is not plain numbers")
    return dtype


def _hashable(key: Any) -> Any:
    if isinstance(key, (list, dict, np.ndarray)):
        raise StateCodecError("a mapping key that is not hashable")
    return key
