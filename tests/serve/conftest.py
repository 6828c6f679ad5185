"""The ``serve_env`` fixture: ``with serve_env(spec, limits) as (base_url, app)`` runs a real server on loopback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def serve_env() -> Callable[..., Any]:
    pytest.importorskip("openenv", reason="openenv-core is not installed (make install-trainers)")
    from serve_helpers import running_server  # tests/serve/serve_helpers.py

    return running_server
