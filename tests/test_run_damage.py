"""Damaged run directories, made by a tiny real ``nanogpt_ppo`` run through the real ``llm-gym`` script: a failed
resume changes nothing, damaged checkpoints are skipped for the newest one that verifies (saying so), damaged run
files give one line and exit code 2, and ``best`` survives a kill -9 between the two renames that replace it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llm_gym_script import error_line, llm_gym  # tests/llm_gym_script.py

from llm_gym.runs import Run, verify_checkpoint

ENV = "LLMBreakout-ascii-v0"
TINY = {
    "n_layer": 1, "n_head": 2, "n_embd": 16, "mlp_ratio": 2, "num_envs": 2, "num_steps": 32, "minibatch_size": 32,
    "update_epochs": 1, "eval_every": 64, "eval_episodes": 1, "eval_max_steps": 20, "threads": 1,
    "progress": False, "total_steps": 192, "checkpoint_every": 64, "keep_checkpoints": 5,
}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with checkpoints at steps 64, 128 and 192 and a ``best`` one."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    sets = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={json.dumps(value)}")]
    done = llm_gym("train", "--agent", "nanogpt_ppo", "--env", ENV, "--run-dir", str(run_dir), *sets)
    assert done.returncode == 0, done.stderr
    assert [step for step, _ in Run.open(run_dir).checkpoints()] == [64, 128, 192]
    return run_dir


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy


def test_checkpoints_carry_a_manifest_that_verifies(run: Path) -> None:
    for _, checkpoint in Run.open(run).checkpoints():
        files = json.loads((checkpoint / "checkpoint.json").read_text())["files"]
        assert {"model.pt", "training.pt"} <= set(files) and verify_checkpoint(checkpoint) is None


def test_a_refused_resume_changes_nothing_and_names_the_fields(run: Path) -> None:
    before = (run / "config.json").read_bytes()
    line = error_line(llm_gym("train", "--resume", str(run), "--set", "num_envs=4", "--set", "n_embd=32"))
    assert "num_envs (2 -> 4)" in line and "n_embd (16 -> 32)" in line
    assert (run / "config.json").read_bytes() == before
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=256")  # a plain resume still works
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "config.json").read_text())["config"]["total_steps"] == 256


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda c: os.truncate(c / "model.pt", 100), "model.pt has 100 bytes"),
        (lambda c: os.truncate(c / "envs.json", 10), "envs.json has 10 bytes"),
        (
            lambda c: (c / "training.pt").write_bytes(b"\0" * (c / "training.pt").stat().st_size),
            "training.pt does not match its checksum",
        ),
        (lambda c: (c / "model.pt").unlink(), "model.pt is missing"),
    ],
    ids=["truncated-model", "truncated-envs", "zeroed-training", "missing-model"],
)
def test_resume_falls_back_to_the_newest_checkpoint_that_verifies(run: Path, damage, problem: str) -> None:
    newest = run / "checkpoints" / "step_192"
    damage(newest)
    line = error_line(llm_gym("play", "--checkpoint", str(newest), "-n", "1"))
    assert "is damaged" in line and problem in line
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=192")  # (step 192 is then written anew)
    assert done.returncode == 0, done.stderr
    assert f"skipping damaged checkpoint {newest} ({problem}" in done.stderr
    said = "".join(done.stdout.split())  # (rich wraps long lines)
    assert "resuming" in said and "checkpoints/step_128" in said


def test_a_checkpoint_json_of_nul_bytes_is_not_complete(run: Path) -> None:
    (run / "checkpoints" / "step_192" / "checkpoint.json").write_bytes(b"\0" * 64)
    assert [step for step, _ in Run.open(run).checkpoints()] == [64, 128]
    done = llm_gym("play", "--checkpoint", str(run), "-n", "1", "--max-steps", "5", "--json")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("content", [b"{}", b'{"agent": "nanogpt_ppo", "env', b"\0" * 10, b"[]"])
def test_a_damaged_config_json_is_one_line(run: Path, content: bytes) -> None:
    (run / "config.json").write_bytes(content)
    assert "config.json is damaged" in error_line(llm_gym("train", "--resume", str(run)))
    assert "config.json is damaged" in error_line(llm_gym("play", "--checkpoint", str(run), "-n", "1"))
    assert (run / "config.json").read_bytes() == content


@pytest.mark.parametrize("other", ["LLMPong-ascii-v0", "OpenSpiel-tic_tac_toe-v0"])
def test_a_policy_on_another_action_set_is_refused(run: Path, other: str) -> None:
    line = error_line(llm_gym("play", "--checkpoint", str(run), "--env", other, "-n", "1"))
    assert f"trained on {ENV} (4 actions)" in line and "action set" in line


def test_best_survives_a_kill_between_the_renames_that_replace_it(run: Path) -> None:
    best = run / "checkpoints" / "best"
    old_step = json.loads((best / "checkpoint.json").read_text())["step"]
    # A real kill -9, at the chosen moment: the process sends itself SIGKILL at the rename that would put the new
    # best in place (the old one has just been moved aside).
    script = textwrap.dedent(f"""
        import os, signal
        from llm_gym.runs import Run
        real_rename = os.rename
        def rename(src, dst):
            if os.path.basename(str(dst)) == "best" and ".tmp-" in os.path.basename(str(src)):
                os.kill(os.getpid(), signal.SIGKILL)
            real_rename(src, dst)
        os.rename = rename
        run = Run.open({str(run)!r})
        with run.checkpoint(999, name="best") as directory:
            (directory / "model.pt").write_bytes(b"new best")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr
    assert not best.exists(), "the kill came between the renames"
    reopened = Run.open(run)  # what every command does first
    assert best.is_dir() and verify_checkpoint(best) is None
    assert json.loads((best / "checkpoint.json").read_text())["step"] == old_step
    assert not [p for p in reopened.checkpoints_dir.iterdir() if p.name.startswith(".")]
    with reopened.checkpoint(999, name="best") as directory:  # and the next replacement goes through
        (directory / "model.pt").write_bytes(b"new best")
    assert json.loads((best / "checkpoint.json").read_text())["step"] == 999


def _rehash(checkpoint: Path) -> None:
    """Rewrite the manifest for the files as they are now, as whoever crafts a checkpoint would."""
    from llm_gym.runs import MANIFEST_FILE
    from llm_gym.runs.checkpoint_files import _manifest

    manifest = json.loads((checkpoint / MANIFEST_FILE).read_text())
    manifest["files"] = _manifest(checkpoint)
    (checkpoint / MANIFEST_FILE).write_text(json.dumps(manifest))


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_resume_runs_no_code_from_a_crafted_checkpoint(run: Path, tmp_path: Path) -> None:
    """A run directory is data: a crafted envs.pkl (an older llm-gym's format) is not unpickled, and an envs.json
    that names a callable is refused; both with the manifest re-hashed, so only the format check stands."""
    import pickle

    marker = tmp_path / "code-ran"
    newest = run / "checkpoints" / "step_192"
    legit = (newest / "envs.json").read_bytes()
    (newest / "envs.json").unlink()
    (newest / "envs.pkl").write_bytes(pickle.dumps({"snapshots": _Payload(marker)}))
    _rehash(newest)
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=256")
    line = error_line(done)
    assert "envs.pkl is a pickle" in line and "LLM_GYM_TRUST_PICKLE=1" in line
    assert not marker.exists(), "unpickling ran the payload"
    (newest / "envs.pkl").unlink()
    crafted = json.loads(legit)
    crafted["value"]["$dict"][0][1] = {"$type": "os:system", "fields": {"command": f"touch {marker}"}}
    (newest / "envs.json").write_text(json.dumps(crafted))
    _rehash(newest)
    line = error_line(llm_gym("train", "--resume", str(run), "--set", "total_steps=256"))
    assert "envs.json cannot be read: an unknown type 'os:system'" in line and not marker.exists()


def test_a_trusted_legacy_pickle_still_resumes(run: Path) -> None:
    """LLM_GYM_TRUST_PICKLE=1 is the documented way to resume a run directory of one's own from before envs.json."""
    import pickle

    from llm_gym.envs.state_codec import loads

    newest = run / "checkpoints" / "step_192"
    state = loads((newest / "envs.json").read_bytes())
    (newest / "envs.json").unlink()
    (newest / "envs.pkl").write_bytes(pickle.dumps(state))
    _rehash(newest)
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=256", env={"LLM_GYM_TRUST_PICKLE": "1"})
    assert done.returncode == 0, done.stderr


def test_a_run_is_trained_by_one_process_at_a_time(run: Path) -> None:
    """Two ``train --resume RUN`` at once both exited 0 and interleaved their checkpoints."""
    import time

    from llm_gym.runs.lock import RunLock

    first = subprocess.Popen(
        [str(Path(sys.executable).parent / "llm-gym"), "train", "--resume", str(run), "--set", "total_steps=100000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (probe := RunLock.try_acquire(run)) is not None and time.monotonic() < deadline:
            probe.release()
            time.sleep(0.05)
        assert probe is None, "the first resume never took the run"
        line = error_line(llm_gym("train", "--resume", str(run), "--set", "total_steps=100000"))
        assert f"{run} is in use by another llm-gym process (pid {first.pid} since" in line
        # readers still read it, and leave the checkpoint being written alone
        assert llm_gym("play", "--checkpoint", str(run), "-n", "1", "--max-steps", "5").returncode == 0
    finally:
        first.kill()
        first.wait()
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=256")  # a killed holder leaves no lock
    assert done.returncode == 0, done.stderr


def test_a_full_disk_is_one_line_and_loses_no_checkpoint(trained: Path, tmp_path: Path) -> None:
    """Disk full (a small tmpfs): train ended in a torch traceback; now one line naming the checkpoint, the
    earlier checkpoints intact and playable, no temporary folder left, and the run resumable once there is room."""
    from small_disk import error_lines, on_small_disk

    done = on_small_disk(tmp_path / "disk", "4m", f"""
        cp -r {trained} "$DISK/run"
        fill 4096
        "$LLM_GYM" train --resume "$DISK/run" --set total_steps=512; echo "train=$?"
        rm -f "$DISK/.fill"
        "$LLM_GYM" play --checkpoint "$DISK/run" -n 1 --max-steps 5 > /dev/null; echo "play=$?"
        ls -a "$DISK/run/checkpoints"
        "$LLM_GYM" train --resume "$DISK/run" --set total_steps=256 > /dev/null; echo "resumed=$?"
    """)  # fmt: skip
    (line,) = error_lines(done.stderr)
    assert f"cannot write {tmp_path / 'disk'}/run/" in line and "the previous checkpoints are kept" in line, line
    assert "train=2" in done.stdout and "play=0" in done.stdout and "resumed=0" in done.stdout, done.stdout
    assert ".tmp-" not in done.stdout and "step_192" in done.stdout


def test_plot_on_a_full_disk_or_an_unwritable_path_is_one_line(trained: Path, tmp_path: Path) -> None:
    from small_disk import error_lines, on_small_disk

    assert "cannot write /proc/x/p.png" in error_line(llm_gym("plot", str(trained), "--out", "/proc/x/p.png"))
    done = on_small_disk(tmp_path / "disk", "1m", f"""
        "$LLM_GYM" plot {trained} --out "$DISK/p.png" > /dev/null && cp "$DISK/p.png" {tmp_path}/before.png
        fill 1024
        "$LLM_GYM" plot {trained} --out "$DISK/p.png" --title again; echo "plot=$?"
        cmp -s "$DISK/p.png" {tmp_path}/before.png && echo "kept"; ls -a "$DISK"
    """)  # fmt: skip
    (line,) = error_lines(done.stderr)
    assert "No space left on device" in line and "p.png" in line and "plot=2" in done.stdout
    assert "kept" in done.stdout and ".tmp" not in done.stdout, done.stdout


def _manifest_step(step: int):
    def damage(checkpoint: Path) -> None:
        manifest = json.loads((checkpoint / "checkpoint.json").read_text())
        (checkpoint / "checkpoint.json").write_text(json.dumps({**manifest, "step": step}))

    return damage


def _rewritten(name: str, content):
    """Replace a file and rewrite the manifest over it, as whoever crafts a checkpoint would."""

    def damage(checkpoint: Path) -> None:
        import torch

        target = checkpoint / name
        target.unlink()
        if content == "symlink":
            target.symlink_to(checkpoint.parent / "step_128" / name)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            torch.save(content, target)
        _rehash(checkpoint)

    return damage


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_manifest_step(10**30), "checkpoint.json records step 1000000000000000000000000000000, not 192"),
        (_manifest_step(-5), "checkpoint.json records step -5, not 192"),
        (_rewritten("model.pt", b"\0" * 4096), "cannot be loaded (RuntimeError"),
        (_rewritten("model.pt", {"bogus": 1}), "cannot be loaded (RuntimeError: Error(s) in loading state_dict"),
        (_rewritten("model.pt", "symlink"), "model.pt is a symbolic link"),
        (_rewritten("training.pt", b"\0" * 4096), "cannot be loaded"),
    ],
    ids=["step-1e30", "step-minus-5", "zeroed-model", "wrong-keys-model", "symlinked-model", "zeroed-training"],
)
def test_a_checkpoint_that_verifies_but_cannot_be_used_is_skipped_saying_why(run: Path, damage, problem: str) -> None:
    """Files rewritten with their manifest (so the checksums hold): resume used them and failed in a traceback
    (a TensorBoard ValueError on every later resume for step 1e30; step -5 was ignored)."""
    newest = run / "checkpoints" / "step_192"
    damage(newest)
    done = llm_gym("train", "--resume", str(run), "--set", "total_steps=256")
    assert done.returncode == 0, done.stderr
    assert f"skipping damaged checkpoint {newest} (" in done.stderr and problem in done.stderr, done.stderr
    assert "checkpoints/step_128" in "".join(done.stdout.split())
    again = llm_gym("train", "--resume", str(run), "--set", "total_steps=320")  # and every later resume works
    assert again.returncode == 0, again.stderr


def test_an_unloadable_policy_is_one_line_for_play_and_copy_policy(run: Path, tmp_path: Path) -> None:
    newest = run / "checkpoints" / "step_192"
    _rewritten("model.pt", b"\0" * 4096)(newest)
    line = error_line(llm_gym("play", "--checkpoint", str(newest), "-n", "1"))
    assert f"checkpoint {newest} cannot be loaded" in line
    line = error_line(llm_gym("copy-policy", str(newest), str(tmp_path / "copy")))
    assert "cannot be loaded" in line and not (tmp_path / "copy").exists()


def test_wrong_keys_in_the_training_state_are_one_line(run: Path) -> None:
    newest = run / "checkpoints" / "step_192"
    _rewritten("training.pt", {"bogus": 1})(newest)
    line = error_line(llm_gym("train", "--resume", str(run), "--set", "total_steps=256"))
    assert f"cannot resume from {newest}: KeyError" in line


def test_env_kwargs_that_are_not_a_table_are_one_line(run: Path) -> None:
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "env_kwargs": "frameskip=2"}))
    for command in (("train", "--resume", str(run)), ("play", "--checkpoint", str(run), "-n", "1")):
        assert "config.json is damaged: env_kwargs is a str, not a table" in error_line(llm_gym(*command))
