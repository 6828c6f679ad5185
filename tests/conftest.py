"""Shared fixtures. Tests mirror the package: tests/envs, tests/agents, tests/lm, tests/cli, tests/rl."""

from __future__ import annotations

import os

import pytest

# Tests stay on one thread per process: the suite runs on 2 cores and torch's default would oversubscribe them.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _no_hub_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in the suite may fetch weights or data sets from a hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
