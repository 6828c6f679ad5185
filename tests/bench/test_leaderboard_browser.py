"""`llm-gym bench --suite smoke --leaderboard`, then the page in a real headless Chromium.

Chromium comes from Debian (`apt-get install chromium`), installed here when missing and the tests run as root;
elsewhere the test is skipped with the reason. Checks: a non-blank screenshot, every table and plot present, every
plot image decoded by the browser, the trajectory viewer's script filling in a step, no console messages, and no
external URL anywhere in the generated pages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_suites import HELDOUT, TTT_RANDOM, entry, suite, train_tiny_ttt_run  # tests/bench_suites.py

# The smoke run is a couple of CPU minutes (the real 135M model among its entries); a shared, loaded machine
# stretches that several-fold, hence more than the default 600 s.
pytestmark = pytest.mark.timeout(1800)

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("Debian's chromium is not installed and this user cannot apt-get install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:
            pytest.skip(f"could not install chromium ({' '.join(command)}): {done.stderr.strip()[-300:]}")
    return shutil.which("chromium") or pytest.skip("apt-get installed chromium but it is not on PATH")


def _run_chromium(chromium: str, tmp: Path, url: str, *extra: str) -> tuple[str, list[str]]:
    """(stdout, console lines) of one headless Chromium run."""
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", *extra, url],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


@pytest.fixture(scope="module")
def smoke_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("smoke-leaderboard")
    command = [str(Path(sys.executable).parent / "llm-gym"), "bench", "--suite", "smoke", "--leaderboard"]
    done = subprocess.run(
        [*command, "--out", str(out), "--record-trajectories", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=1700,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_smoke_leaderboard_files(smoke_board: Path) -> None:
    for name in ("leaderboard.md", "index.html", "results.jsonl", "episodes.sqlite", "plots/aggregate.svg"):
        assert (smoke_board / name).is_file(), name
    episodes = sorted((smoke_board / "trajectories").glob("*.js"))
    assert episodes, "the smoke run records trajectories"
    pages = [smoke_board / "index.html", smoke_board / "trajectories" / "viewer.html", *episodes]
    for page in pages:
        text = page.read_text()
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text), f"external URL in {page.name}"
        assert "http" not in text.replace("http://www.w3.org", ""), f"external URL in {page.name}"


def test_the_leaderboard_renders_in_chromium(chromium: str, smoke_board: Path, tmp_path: Path) -> None:
    index = smoke_board / "index.html"
    shot = tmp_path / "index.png"
    _, console = _run_chromium(chromium, tmp_path, index.as_uri(), "--window-size=1280,2000", f"--screenshot={shot}")
    assert console == [], console
    import imageio.v3 as iio

    pixels = np.asarray(iio.imread(shot))[..., :3].astype(int)
    assert pixels.shape[0] >= 1000
    not_white = (pixels.sum(axis=2) < 720).mean()
    assert not_white > 0.02 and pixels.std() > 10, "the screenshot is blank"

    # The DOM as the browser built it: every family's table and plot.
    dom, console = _run_chromium(chromium, tmp_path, index.as_uri(), "--dump-dom")
    assert console == [], console
    for family in ("aggregate", "atari", "openspiel", "trace", "trajectories"):
        assert f'data-family="{family}"' in dom, family
    plots = re.findall(r'<img src="(plots/[^"]+)"', dom)
    assert {"plots/aggregate.svg", "plots/atari.svg", "plots/openspiel.svg", "plots/trace.svg"} <= set(plots)

    # A probe page loads the leaderboard in a frame and reports the decoded size of every plot image.
    probe = smoke_board / "probe.html"
    probe.write_text(
        '<iframe id="f" src="index.html"></iframe><pre id="out"></pre><script>'
        "document.getElementById('f').onload = () => { const imgs = document.getElementById('f').contentDocument.images;"
        "document.getElementById('out').textContent = Array.from(imgs).map(i => i.getAttribute('src') + '=' + "
        "i.naturalWidth + 'x' + i.naturalHeight).join(' '); };</script>"
    )
    dom, _ = _run_chromium(chromium, tmp_path, probe.as_uri(), "--dump-dom", "--virtual-time-budget=5000")
    sizes = re.search(r'<pre id="out">([^<]*)</pre>', dom).group(1).split()
    assert len(sizes) == len(plots) and sizes, dom[-500:]
    for item in sizes:
        width, height = item.split("=")[1].split("x")
        assert int(width) > 100 and int(height) > 100, f"plot did not render: {item}"


def test_the_trajectory_viewer_steps_in_chromium(chromium: str, smoke_board: Path, tmp_path: Path) -> None:
    viewer = (smoke_board / "trajectories" / "viewer.html").as_uri()
    episodes = sorted((smoke_board / "trajectories").glob("*.js"))
    assert episodes
    for data in episodes:
        dom, console = _run_chromium(chromium, tmp_path, f"{viewer}?episode={data.stem}", "--dump-dom")
        assert console == [], (data.name, console)
        observation = re.search(r'<pre id="obs">(.*?)</pre>', dom, re.S).group(1)
        assert observation.strip(), f"the viewer script did not show step 1 of episode {data.stem}"
        assert re.search(r'<span id="where">step 1 of \d+</span>', dom)
    # A score-mode LM episode lists every legal action with its probability.
    lm_episodes = [p for p in episodes if "lm-smollm2-135m on tic_tac_toe" in p.read_text()]
    assert lm_episodes
    dom, _ = _run_chromium(chromium, tmp_path, f"{viewer}?episode={lm_episodes[0].stem}", "--dump-dom")
    probabilities = [float(p) for p in re.findall(r"<td>(0\.\d{4}|1\.0000)</td>", dom)]
    assert len(probabilities) >= 2 and sum(probabilities) == pytest.approx(1.0, abs=2e-3)


VALUE_SUITE = suite(
    "a checkpoint with a value head",
    HELDOUT,
    TTT_RANDOM,
    entry("tiny-ppo", checkpoint="RUN", splits=["heldout"]),
    episodes=1,
    num_envs=1,
)


@pytest.fixture(scope="module")
def value_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny real ppo_lora checkpoint benchmarked with --record-trajectories: its steps carry value estimates."""
    tmp = tmp_path_factory.mktemp("value-board")
    train_tiny_ttt_run(tmp)
    suite = tmp / "values.toml"
    suite.write_text(VALUE_SUITE.replace("RUN", str(tmp / "run")))
    command = [str(Path(sys.executable).parent / "llm-gym"), "bench", "--suite", str(suite), "--leaderboard"]
    done = subprocess.run(
        [*command, "--out", str(tmp / "board"), "--record-trajectories", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "board"


def test_the_viewer_shows_a_checkpoints_value_estimates_in_chromium(
    chromium: str, value_board: Path, tmp_path: Path
) -> None:
    from llm_gym.bench.store import EpisodeStore

    with EpisodeStore(value_board / "episodes.sqlite") as store:
        (episode_id,) = store.trajectory_ids()
        steps = store.trajectory(episode_id)["steps"]
    assert steps and all(isinstance(step["value"], float) for step in steps)
    viewer = (value_board / "trajectories" / "viewer.html").as_uri()
    dom, console = _run_chromium(chromium, tmp_path, f"{viewer}?episode={episode_id}", "--dump-dom")
    assert console == [], console
    assert f"<li>value estimate: {steps[0]['value']:.3f}</li>" in dom
    # The value chart: one point per step, its range stated, a marker at step 1.
    points = re.search(r'<polyline points="([^"]+)"', dom).group(1).split()
    assert len(points) == len(steps)
    low, high = min(s["value"] for s in steps), max(s["value"] for s in steps)
    assert f"value estimate at each step, {low:.3f} to {high:.3f}" in dom
    assert re.search(r'<line y1="10" y2="116" stroke="#c0392b" x1="64" x2="64">', dom)
    # Labelled axes: the value's range on the left, steps 1..N below, and what each axis is.
    labels = re.findall(r"<text [^>]*>([^<]*)</text>", dom)
    assert {f"{low:.3f}", f"{high:.3f}", "1", str(len(steps)), "step", "value estimate"} <= set(labels), labels
