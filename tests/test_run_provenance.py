"""A run's ``config.json`` names the code that made it (llm_gym/runs/provenance.py): the package version, and in a git
checkout its commit and whether tracked files differed; none for a copy that no checkout tracks. Real git repos."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from llm_gym.runs import CONFIG_FILE, Run
from llm_gym.runs.provenance import PACKAGE_DIR, code_version


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_checkout_gives_its_commit_and_whether_tracked_files_changed(tmp_path: Path) -> None:
    package = tmp_path / "repo" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "add", "pkg/__init__.py")
    _git(tmp_path / "repo", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = _git(tmp_path / "repo", "rev-parse", "HEAD")
    assert code_version(package) | {"llm_gym": None} == {"llm_gym": None, "commit": commit, "modified": False}
    (package / "__init__.py").write_text("x = 2\n")
    assert code_version(package)["modified"] is True
    (package / "new.py").write_text("")  # an untracked file is not a change of the committed code
    (package / "__init__.py").write_text("x = 1\n")
    assert code_version(package)["modified"] is False


def test_a_copy_no_checkout_tracks_names_no_commit(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    assert code_version(outside)["commit"] is None and code_version(outside)["modified"] is None
    # inside some other project's checkout (a venv in it, say) the package's files are not tracked there
    _git(tmp_path, "init", "-q")
    (outside / "__init__.py").write_text("")
    assert code_version(outside)["commit"] is None


def test_a_new_run_records_the_code_that_made_it(tmp_path: Path) -> None:
    run = Run.create("OpenSpiel-kuhn_poker-v0", "random", {"seed": 0}, path=tmp_path / "run")
    run.close()
    code = json.loads((tmp_path / "run" / CONFIG_FILE).read_text())["code"]
    assert code == code_version()
    tracked = subprocess.run(["git", "-C", str(PACKAGE_DIR), "ls-files", "--error-unmatch", "__init__.py"],
                             capture_output=True, check=False).returncode == 0  # fmt: skip
    if tracked:  # the suite runs from a clone (CI, make test): its commit
        assert code["commit"] == _git(PACKAGE_DIR, "rev-parse", "HEAD")
    assert Run.open(tmp_path / "run").read_config()["config"] == {"seed": 0}
