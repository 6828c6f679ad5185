"""What the leaderboard shows about how a checkpoint entry was trained, read once from its run directory.

It is copied into the store when the entry is benchmarked, so the leaderboard renders from the store alone even
where the run directory is not present (runs/ is not committed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_gym.runs import Run, find_run_dir
from llm_gym.training.curves import read_events

CURVE_TAGS = (
    ("charts/episodic_return", "episodic return"),
    ("eval/mean_return", "evaluation return"),
    ("train/answer_prob", "answer probability (train)"),
    ("val/answer_prob", "answer probability (held-out demos)"),
)
"""The learning curve: the first of these scalars the run logged. RL agents log episode returns; ``sft`` learns
from demonstrations and logs the probability of the demonstrated answer instead."""
CURVE_TAG = CURVE_TAGS[0][0]
MAX_CURVE_POINTS = 200


def training_info(checkpoint: Path) -> dict[str, Any]:
    """env steps, wall time, device and the learning curve of the run that wrote ``checkpoint``."""
    run = Run.open(find_run_dir(checkpoint))
    saved = run.read_config()
    summary = run.read_summary()  # {} for a run stopped before its end
    curve, metric, first_time, last_time = learning_curve(run.path / "tb")
    wall = summary.get("wall_seconds")
    if wall is None and first_time is not None and last_time is not None:
        wall = last_time - first_time  # from the event timestamps where the agent does not report it
    config = saved.get("config", {})
    step_file = checkpoint / "checkpoint.json"
    step = json.loads(step_file.read_text()).get("step") if step_file.is_file() else None
    demos = summary.get("demo_decisions") or {}
    from_demos = bool(demos) or saved.get("agent") == "sft"  # a stopped sft run may have no summary
    return {
        "run": run.path.name,
        "agent": saved.get("agent"),
        "env_id": saved.get("env_id"),
        "env_kwargs": saved.get("env_kwargs", {}),
        "env_steps": summary.get("env_steps", step),
        "checkpoint_step": step,
        # Demonstration-trained runs (sft) take no env steps: their budget is demonstrations x epochs.
        "demo_decisions": demos.get("train"),
        "epochs": summary.get("epochs"),
        "wall_seconds": wall,
        "device": str(summary.get("device") or config.get("device", "cpu")),
        "seed": config.get("seed"),
        "model": config.get("model"),
        "curve": curve,
        "curve_metric": metric,
        "curve_x": "demonstration decisions seen" if from_demos else "env steps",
        "examples_seen": summary.get("examples_seen", step) if from_demos else None,
    }


def learning_curve(tb_dir: Path) -> tuple[list[tuple[float, float]], str | None, float | None, float | None]:
    """``[(step, value)]`` of the run's learning-curve scalar (:data:`CURVE_TAGS`, at most MAX_CURVE_POINTS), what
    it measures, and the first and last event times of the run's TensorBoard events."""
    if not tb_dir.is_dir():
        return [], None, None, None
    accumulator = read_events(tb_dir)
    tags = accumulator.Tags().get("scalars", [])
    if not tags:
        return [], None, None, None
    times = [e.wall_time for tag in tags for e in accumulator.Scalars(tag)]
    tag, metric = next(((t, m) for t, m in CURVE_TAGS if t in tags), (None, None))
    events = accumulator.Scalars(tag) if tag else []
    stride = max(1, len(events) // MAX_CURVE_POINTS)
    curve = [(float(e.step), float(e.value)) for e in events[::stride]]
    return curve, metric, min(times), max(times)
