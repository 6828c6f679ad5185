"""What a ``reflection`` run reports: each iteration's files and scalars, its lines on the terminal, and the summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.atomic import write_json_atomic
from llm_gym.lm.prompts import observation_text
from llm_gym.runs import Run

REFLECTION_COUNTS = ("proposed", "parsed", "unparsable", "unchanged", "verified", "improved", "rejected", "unverified")


def iteration_scalars(results: dict[str, Any]) -> dict[str, float]:
    """What TensorBoard gets of one iteration: the trial, the reflection counts, the fine-tune and the evaluation."""
    scalars = {
        "trial/mean_return": results["trial"]["mean_return"],
        "trial/mean_score": results["trial"]["mean_score"],
        **{f"reflections/{k}": float(v) for k, v in results["reflections"].items()},
        "finetune/examples": results["finetune"]["examples"],
    }
    if results["finetune"]["last_loss"] is not None:
        scalars["finetune/first_loss"] = results["finetune"]["first_loss"]
        scalars["finetune/last_loss"] = results["finetune"]["last_loss"]
    if "eval" in results:
        scalars["eval/mean_return"] = results["eval"]["mean_return"]
    return scalars


def write_iteration(
    run: Run, results: dict[str, Any], corrections: Sequence[Any] = (), verdicts: Sequence[Any] = ()
) -> None:
    """``iteration_N/results.json`` and ``corrections.jsonl`` (each correction, its replay and whether it was kept)."""
    directory = run.path / f"iteration_{results['iteration']}"
    directory.mkdir(exist_ok=True)
    with open(directory / "corrections.jsonl", "w") as handle:
        for (candidate, reflection), verdict in zip(corrections, verdicts, strict=True):
            record = {
                "episode": candidate.episode,
                "step": candidate.step,
                "observation": observation_text(candidate.before),
                "taken": candidate.action_name,
                "proposed": reflection.action_name,
                "analysis": reflection.analysis,
                "reasoning": reflection.reasoning,
                "outcome": candidate.outcome,
                "replay": None
                if verdict is None
                else {"taken": verdict.taken_outcome, "proposed": verdict.proposed_outcome},
                "kept": verdict is None or verdict.kept,
            }
            handle.write(json.dumps(record) + "\n")
    write_json_atomic(directory / "results.json", results)


def print_evaluation(when: str, evaluation: dict[str, Any], config: ReflectionConfig, cut: int) -> None:
    """One line: the greedy evaluation's mean return with its 95% interval, on which held-out games."""

    games = len(evaluation["returns"])
    Console().print(
        f"{when}: greedy return {evaluation['mean_return']:.2f} ± {evaluation['ci95']:.2f} (95% CI) on {games} "
        f"held-out games (seeds {config.eval_seed}-{config.eval_seed + games - 1}, cut at {cut} "
        "steps)",
        highlight=False,
    )


def print_iteration(results: dict[str, Any]) -> None:
    """One line per iteration: the trial, what the reflections became, the examples, the evaluation."""

    r, t = results["reflections"], results["trial"]
    line = (
        f"iteration {results['iteration']}: trial return {t['mean_return']:.2f} ± {t['ci95']:.2f} "
        f"({t['episodes']} episodes); reflections {r['proposed']} proposed, {r['parsed']} parsed, "
        f"{r['verified']} verified ({r['improved']} strictly better), {r['rejected']} rejected; "
        f"{results['finetune']['examples']} examples"
    )
    if "eval" in results:
        line += f"; eval {results['eval']['mean_return']:.2f}"
    Console().print(line)


def summarize(
    history: Sequence[dict[str, Any]], agent: str, env_id: str, config: ReflectionConfig, plot: Path,
    checkpoint: Path | None,
) -> dict[str, Any]:  # fmt: skip
    """``summary.json``: the trials' and evaluations' returns over the iterations, and the reflections' counts."""
    evals = [h for h in history if "eval" in h]
    trials = [h for h in history if "trial" in h]
    return {
        "agent": agent,
        "env_id": env_id,
        "model": config.model,
        "iterations": len(trials),
        "episodes": sum(h["trial"]["episodes"] for h in trials),
        "env_steps": sum(h["trial"]["steps"] for h in trials),
        "mean_return": trials[-1]["trial"]["mean_return"] if trials else None,
        "ci95": trials[-1]["trial"]["ci95"] if trials else None,
        "first_eval_return": evals[0]["eval"]["mean_return"] if evals else None,
        "final_eval_return": evals[-1]["eval"]["mean_return"] if evals else None,
        "trial_returns": [h["trial"]["mean_return"] for h in trials],
        "eval_returns": [(h["iteration"], h["eval"]["mean_return"]) for h in evals],
        "reflections": {key: sum(h["reflections"][key] for h in trials) for key in REFLECTION_COUNTS},
        "plot": str(plot),
        "checkpoint": str(checkpoint) if checkpoint else None,
    }
