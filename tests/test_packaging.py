"""Packaging: agents/ installs as llm_gym.agents (never a bare `agents`), every subpackage ships, py.typed is there."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_bare_agents_import_name(tmp_path: Path) -> None:
    # Run from an empty directory so the repository root is not on sys.path.
    probe = (
        "import importlib.util as u; print(u.find_spec('agents') is None, u.find_spec('llm_gym.agents') is not None)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_every_subpackage_is_packaged() -> None:
    setup = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, setuptools; setuptools.setup = lambda **kw: print(sorted(kw['packages'])); "
            "runpy.run_path('setup.py')",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    packaged = set(eval(setup.stdout))  # a printed list of names
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "llm_gym").rglob("__init__.py")}
    on_disk |= {"llm_gym." + ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "agents").rglob("__init__.py")}
    assert on_disk <= packaged


def test_typed_and_console_script() -> None:
    assert (ROOT / "llm_gym" / "py.typed").is_file()
    scripts = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts.get("llm-gym") == "llm_gym.cli:main"
    assert importlib.util.find_spec("llm_gym.agents.baselines") is not None
