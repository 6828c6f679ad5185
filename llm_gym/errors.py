"""Errors that tell the user what to do.

Every error the CLI can show is an :class:`LLMGymError`; the CLI prints its message on one line and exits with
code 2. Messages name the fix (a command to run, a package to install, the close matches of a mistyped name).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LLMGymError(Exception):
    """Base class of every error llm-gym raises on purpose."""


SHORT_LIST = 12
"""Names an unknown-name error lists in full when none is close (longer lists: the command that lists them)."""


class UnknownNameError(LLMGymError, KeyError):
    """An env id, agent, backend or option name that is not registered."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        self.kind, self.name, self.known = kind, name, sorted(known)
        matches = suggest(name, self.known)
        message = f"unknown {kind} {name!r}"
        if matches:
            message += "; did you mean " + ", ".join(repr(m) for m in matches) + "?"
        elif 0 < len(self.known) <= SHORT_LIST:  # nothing close: a short list is shown whole
            message += "; known: " + ", ".join(self.known)
        if hint and hint[0].isupper() and not message.endswith("?"):
            message += "."  # the hint is a sentence of its own
        if hint:
            message += f" {hint}"
        super().__init__(message)

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class ConfigError(LLMGymError, ValueError):
    """A configuration key or value that cannot be used."""


class EnvInputError(ConfigError):
    """An action or ``reset`` argument an env cannot take (wrong type, outside the valid range); the env is unchanged."""


class MissingDependencyError(LLMGymError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f'{what} needs an optional dependency: pip install "llm-gym[{extra}]"')


class CheckpointError(LLMGymError):
    """A run directory or checkpoint that cannot be read or resumed."""


class UnsupportedEnvError(LLMGymError):
    """An agent or feature that does not work with the given env."""


class EnvProtocolError(LLMGymError):
    """An env that breaks llm-gym's env contract (:mod:`llm_gym.envs.protocol`); raised by ``check_llm_env``."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` naming the close matches of ``name`` among ``known`` (:func:`suggest`), or ``""``."""
    close = suggest(name, known)
    return f"; did you mean {', '.join(close)}?" if close else ""


def suggest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Close matches of ``name`` among ``known``: case-insensitive, then by substring."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    matches = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)]
    if not matches:
        needle = name.lower()
        matches = [k for k in known if needle and (needle in k.lower() or k.lower() in needle)][:n]
    return matches
