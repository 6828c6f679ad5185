"""Spaces shared by every env family."""

from __future__ import annotations

import string

import gymnasium as gym

TEXT_CHARSET = string.printable
"""Characters a text observation may hold: printable ASCII plus whitespace (newlines and tabs included)."""


def text_space(max_length: int) -> gym.spaces.Text:
    """A Text space over :data:`TEXT_CHARSET` for observations of at most ``max_length`` characters."""
    return gym.spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)
