"""A fixture that installs a plugin the way pip would: a module plus a dist-info with an ``llm_gym`` entry point."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llm_gym.plugins import reset_plugin_manager

InstallPlugin = Callable[..., None]


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InstallPlugin]:
    installed: list[str] = []

    def install(module: str, source: str, *, entry_point: str | None = None, distribution: str | None = None) -> None:
        root = tmp_path / module
        root.mkdir()
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        dist = distribution or module.replace("_", "-")
        info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[llm_gym]\n{entry_point or module} = {module}\n")
        monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        installed.append(module)
        reset_plugin_manager()

    yield install
    for module in installed:
        sys.modules.pop(module, None)
    reset_plugin_manager()
