"""What crosses the wire: an env's observation and info as JSON values, exactly.

Numbers stay numbers (numpy scalars become Python ones, non-finite floats become null), arrays become lists,
named tuples and dataclasses become objects, and an image (a vision env's ``uint8`` frame) becomes
``{"shape", "dtype", "base64"}`` of its raw bytes so a client can rebuild it bit for bit (:func:`decode_image`).
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def to_wire(value: Any) -> Any:
    """``value`` as JSON-safe data."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.dtype == np.uint8 and value.ndim == 3:
            return encode_image(value)
        return to_wire(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if hasattr(value, "_asdict"):  # a named tuple: its fields by name
        return to_wire(value._asdict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_wire(dataclasses.asdict(value))
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_wire(v) for v in value), key=repr)
    return str(value)


def encode_image(frame: np.ndarray) -> dict[str, Any]:
    """A frame as its shape, dtype and raw bytes (base64)."""
    data = np.ascontiguousarray(frame)
    return {"shape": list(data.shape), "dtype": str(data.dtype), "base64": base64.b64encode(data.tobytes()).decode()}


def decode_image(encoded: Mapping[str, Any]) -> np.ndarray:
    """The frame :func:`encode_image` sent."""
    raw = base64.b64decode(encoded["base64"])
    return np.frombuffer(raw, dtype=np.dtype(encoded["dtype"])).reshape(encoded["shape"])
