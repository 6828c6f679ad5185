"""Play-only copies of a checkpoint: the run's config and one checkpoint without its training state.

A checkpoint holds what playing needs (an adapter, a value head, a policy's weights) beside what only ``--resume``
needs (the optimiser, the scheduler, RNG states; each agent names those files), and the second is often the bigger
part: an sft run's ``sft_training.pt`` is twice its adapter. Moving a checkpoint off the machine that trained it (a GPU box to a
laptop, into a bench store's machine) needs only the first. ``copy_policy`` writes a new run directory with the
run's ``config.json``, ``summary.json`` and TensorBoard scalars (the bench's training row and learning curve read
them) and the one checkpoint minus its training state, under a fresh manifest, so it verifies and plays like the
original; a ``--resume`` of it is refused in one line instead of failing inside an agent.

It works for every learning agent and stays an llm-gym run (``play --checkpoint``, bench checkpoint entries,
``init_adapter``). ``llm-gym export`` (the ppo_lora plugin's command) is the other way out: a LoRA checkpoint as a
plain model directory, merged or as the adapter alone, for other backends and tools.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from llm_gym.agent import EnvConfig
from llm_gym.atomic import WriteError, error_for, writing
from llm_gym.errors import CheckpointError
from llm_gym.runs import CONFIG_FILE, MANIFEST_FILE, SUMMARY_FILE, Run, find_run_dir, verify_checkpoint
from llm_gym.training.checkpoints import checkpoint_config, loading
from llm_gym.training.loop import ENVS_FILE, LEGACY_ENVS_FILE, TASKS_FILE

ENV_STATE_FILES = (ENVS_FILE, LEGACY_ENVS_FILE, TASKS_FILE)
"""What only a resume reads, for every agent: the envs where they stood and the task sampler's state (written by
the shared stepping path). Each agent names its own such files (:meth:`~llm_gym.agent.Agent.resume_only_files`)."""
COPY_FILE = "policy_copy.json"
"""Written into the copied checkpoint: where it came from and which files it was copied without."""


def copy_policy(source: str | Path, dest: str | Path) -> Path:
    """Copy ``source`` (a run directory: its newest checkpoint that verifies; or one ``checkpoints/<name>``) into
    the new run directory ``dest`` without its training state. Returns the copied checkpoint's path.
    ``dest`` is checked before anything is written; a failure part-way leaves no half checkpoint (``Run.checkpoint``
    renames it into place only when complete)."""
    run, checkpoint, resume_only = _source_checkpoint(Path(source))
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CheckpointError(f"{dest} already exists and is not empty; pass a new directory to copy into")
    # A policy file can match its manifest and still not load (the manifest rewritten over it): never copy that.
    agent_cls, config = checkpoint_config(run)
    saved = run.read_config()
    with loading(checkpoint):
        agent_cls(config).policy(EnvConfig(saved["env_id"], saved["env_kwargs"]), checkpoint)
    manifest = json.loads((checkpoint / MANIFEST_FILE).read_text())
    listed = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    dropped = sorted(
        {name for name in resume_only if name in listed or (checkpoint / name).exists()}
        | set(_copied_without(checkpoint))  # a copy of a copy stays a copy
    )
    step = int(manifest["step"])
    made = not dest.exists()
    try:
        with writing(dest):  # a full disk or an unwritable place: one line, and no half copy left
            _copy(run, checkpoint, dest, step, dropped)
    except BaseException as exc:
        _undo(dest, made)
        if isinstance(exc, WriteError):
            raise error_for(dest, exc, "nothing was copied") from exc
        raise
    name = checkpoint.name if not checkpoint.name.startswith("step_") else None
    return dest / "checkpoints" / (name or f"step_{step}")


def _undo(dest: Path, made: bool) -> None:
    """Remove what a failed copy wrote: ``dest`` itself where it made it, else (an empty folder) its content."""
    if made:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir() if dest.is_dir() else ():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _copy(run: Run, checkpoint: Path, dest: Path, step: int, dropped: list[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(run.path / CONFIG_FILE, dest / CONFIG_FILE)
    if (run.path / SUMMARY_FILE).is_file():
        shutil.copy2(run.path / SUMMARY_FILE, dest / SUMMARY_FILE)
    if (run.path / "tb").is_dir():
        shutil.copytree(run.path / "tb", dest / "tb")
    copied = Run.open(dest, claim=True)
    name = checkpoint.name if not checkpoint.name.startswith("step_") else None
    try:
        with copied.checkpoint(step, name=name) as tmp:  # a fresh manifest of the files kept
            for path in sorted(checkpoint.rglob("*")):
                relative = path.relative_to(checkpoint)
                if path.is_file() and path.name != MANIFEST_FILE and relative.as_posix() not in dropped:
                    (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, tmp / relative)
            (tmp / COPY_FILE).write_text(
                json.dumps({"source": str(checkpoint.resolve()), "without": dropped}, indent=2) + "\n"
            )
    finally:
        copied.close()


def _source_checkpoint(path: Path) -> tuple[Run, Path, tuple[str, ...]]:
    """The run, the checkpoint to copy (the one given, or the run's newest that verifies) and the names of the
    files only a resume reads (the run's agent says which). Its training state may already be missing (a checkpoint
    copied off a GPU box without it); every file present must verify."""
    run = Run.open(find_run_dir(path))
    agent_cls, config = checkpoint_config(run)  # the agent plugin that trained the run says what is resume-only
    resume_only = (*agent_cls(config).resume_only_files(), *ENV_STATE_FILES)
    whole_run = path.resolve() in (run.path.resolve(), run.checkpoints_dir.resolve())
    candidates = [c for _, c in reversed(run.checkpoints())] if whole_run else [path]
    problems = []
    for candidate in candidates:
        problem = verify_checkpoint(candidate, missing_ok=resume_only)
        if problem is None:
            return run, candidate, resume_only
        problems.append(f"{candidate.name}: {problem}")
    found = "; ".join(problems) if problems else "it has none"
    raise CheckpointError(f"no checkpoint of {path} verifies ({found}); nothing was copied")


def refuse_resume_of_policy_copy(checkpoint: Path | None) -> None:
    """Raise when the checkpoint a resume would continue from was copied without its training state."""
    without = _copied_without(checkpoint) if checkpoint is not None else []
    if without:
        raise CheckpointError(
            f"{checkpoint} is a play-only copy (llm-gym copy-policy) without its training state "
            f"({', '.join(without)}), so it cannot be resumed; resume the run it came from, or start a new run from "
            "it (sft/ppo_lora: --set init_adapter=...)"
        )


def _copied_without(checkpoint: Path) -> list[str]:
    """The files a play-only copy was made without ([] for a checkpoint that is no such copy)."""
    record = checkpoint / COPY_FILE
    return list(json.loads(record.read_text()).get("without") or []) if record.is_file() else []
