"""The ``reflection`` loop, top to bottom: set up (or resume after the last finished iteration), evaluate the
zero-shot model, then per iteration: trial -> reflect on poor steps -> verify the corrections by replay ->
fine-tune on the kept ones -> evaluate -> ``iteration_N/results.json``, TensorBoard, checkpoint ``step_N``.
At the end: ``summary.json`` and ``reward_over_iterations.png``.

Every random choice of iteration N is seeded from (seed, N), so an iteration killed half-way and run again after
``--resume`` does exactly what it would have done.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection.config import ReflectionConfig
from llm_gym.agents.reflection.model import ReflectionModel
from llm_gym.agents.reflection.plot import plot_rewards
from llm_gym.agents.reflection.prompts import (
    Reflection,
    StepForReflection,
    parse_reflection,
    reflection_instructions,
    reflection_observation,
    scored_choice_observation,
)
from llm_gym.agents.reflection.trial import Candidate, play_trial
from llm_gym.agents.reflection.verify import PolicyContinuation, RandomContinuation, verify
from llm_gym.atomic import write_json_atomic
from llm_gym.callbacks import Callback
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import step_instructions
from llm_gym.lm.backends import GenerateRequest, LMBackend, ScoreRequest
from llm_gym.lm.finetune import Example, TrainSettings, train_answers
from llm_gym.lm.policy import LMPolicy
from llm_gym.lm.prompts import observation_text
from llm_gym.lm.runtime import configure_threads
from llm_gym.runs import Run, played_history
from llm_gym.stats import mean_ci95
from llm_gym.training.evaluation import run_episodes
from llm_gym.training.loop import scaled_eval_steps

STATE_FILE = "state.json"


def _policy(backend: LMBackend, env: EnvConfig, config: ReflectionConfig, *, greedy: bool, seed: int) -> LMPolicy:
    """The model acting on ``env``: with the episode's last K turns where the env keeps them (``history=K``), so
    the trial, the replays and the evaluation see the prompts the fine-tuning examples are built from."""
    return LMPolicy(
        backend,
        env,
        mode=config.action_mode,
        greedy=greedy,
        temperature=config.temperature,
        max_new_tokens=config.max_new_tokens,
        seed=seed,
        history=played_history(env.kwargs, None),
    )


def evaluate(backend: LMBackend, env: EnvConfig, config: ReflectionConfig) -> dict[str, Any]:
    """Greedy episodes on the held-out seeds ``eval_seed + i``, each cut at ``eval_max_steps`` or, in a short run,
    sooner: an evaluation plays about as many decisions as the trials may (:func:`eval_max_steps`)."""
    results = run_episodes(
        _policy(backend, env, config, greedy=True, seed=config.seed),
        env,
        config.eval_episodes,
        seed=config.eval_seed,
        num_envs=config.eval_episodes,
        max_steps=eval_max_steps(config),
    )
    returns = [r.episode_return for r in results]
    mean, ci = mean_ci95(returns)
    scores = [float(r.final_info.get("score", r.episode_return)) for r in results]
    return {"mean_return": mean, "ci95": ci, "returns": returns, "mean_score": sum(scores) / len(scores)}


def eval_max_steps(config: ReflectionConfig) -> int:
    """The cut of every evaluation episode of a run, scaled with its trials' budget (iterations x episodes x
    max_steps; :func:`llm_gym.training.loop.scaled_eval_steps`): one iteration of two 40-step Pong episodes evaluates 4
    episodes of 64 steps, not 4 whole games of up to 1,000."""
    budget = config.iterations * config.episodes * config.max_steps
    return scaled_eval_steps(config.eval_max_steps, config.eval_episodes, budget)


def reflect(
    backend: LMBackend, candidates: Sequence[Candidate], traits: EnvTraits, config: ReflectionConfig, seed: int
) -> tuple[list[tuple[Candidate, Reflection]], dict[str, int]]:
    """Ask the model about each candidate; the corrections that name a legal action other than the one taken, and
    counts (proposed = asked, parsed = named a legal action, unchanged = named the action taken)."""
    mode = config.reflection_answer
    # Each step's own rules (an OpenSpiel task's variant and opponent), as the policy saw them when it moved.
    systems = [reflection_instructions(step_instructions(c.info, traits.instructions), mode) for c in candidates]
    prompts = [
        reflection_observation(
            StepForReflection(c.before, c.after, c.action_name, c.legal_names, c.reward, c.outcome, c.horizon_rewards),
            mode,
        )
        for c in candidates
    ]
    completions = backend.generate(
        [GenerateRequest(system, p) for system, p in zip(systems, prompts, strict=True)],
        max_new_tokens=config.reflection_tokens,
        temperature=config.reflection_temperature,
        seed=seed,
    )
    if mode == "json":
        reflections = [
            parse_reflection(done.text, c.legal_names, c.legal_ids, traits.aliases)
            for c, done in zip(candidates, completions, strict=True)
        ]
    else:  # the other legal action the model rates most likely after its own analysis, exactly
        others = [[i for i, a in enumerate(c.legal_ids) if a != c.action] for c in candidates]
        scores = backend.score(
            [
                ScoreRequest(system, scored_choice_observation(p, done.text), tuple(c.legal_names[i] for i in rest))
                for c, system, p, done, rest in zip(candidates, systems, prompts, completions, others, strict=True)
                if rest
            ]
        )
        reflections, answered = [], iter(scores)
        for c, done, rest in zip(candidates, completions, others, strict=True):
            if not rest:  # a forced move: nothing else to propose
                reflections.append(None)
                continue
            best = rest[int(next(answered).argmax())]
            reflections.append(Reflection(c.legal_ids[best], c.legal_names[best], done.text.strip(), ""))
    counts = {"proposed": len(candidates), "parsed": 0, "unparsable": 0, "unchanged": 0}
    corrections = []
    for candidate, reflection in zip(candidates, reflections, strict=True):
        if reflection is None:
            counts["unparsable"] += 1
            continue
        counts["parsed"] += 1
        if reflection.action == candidate.action:  # nothing to correct: the model stands by its move
            counts["unchanged"] += 1
            continue
        corrections.append((candidate, reflection))
    return corrections, counts


def _load_state(checkpoint: Path | None) -> list[dict[str, Any]]:
    if checkpoint is None:
        return []
    return list(json.loads((checkpoint / STATE_FILE).read_text())["history"])


def train(
    config: ReflectionConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], agent: str
) -> dict[str, Any]:
    # -- setup -------------------------------------------------------------------------------------------------
    configure_threads(config.threads)
    torch.manual_seed(config.seed)
    traits = EnvTraits.probe(env)
    cloning = traits.snapshots
    history = _load_state(run.resumed_from)
    model = ReflectionModel(config, run.resumed_from)
    start = (history[-1]["iteration"] + 1) if history else 1
    for callback in callbacks:
        callback.on_training_start(env.env_id, config, start - 1)
    if not history and config.eval_episodes > 0:
        zero_shot = {"iteration": 0, "eval": evaluate(model.backend(), env, config)}
        _write_iteration(run, zero_shot)
        run.log_scalars(0, {"eval/mean_return": zero_shot["eval"]["mean_return"]})
        history.append(zero_shot)
        if config.progress:
            _print_evaluation("before training", zero_shot["eval"], config)

    for iteration in range(start, config.iterations + 1):
        started = time.perf_counter()
        seed = config.seed * 1000 + iteration
        backend = model.backend()
        # -- trial ---------------------------------------------------------------------------------------------
        actor = _policy(backend, env, config, greedy=config.trial_greedy, seed=seed)
        trial = play_trial(
            actor,
            env,
            config.episodes,
            seed=config.seed + (iteration - 1) * config.episodes,
            num_envs=config.episodes,
            max_steps=config.max_steps,
            rate=config.reflection_rate,
            gamma=config.credit_gamma,
            threshold=config.outcome_threshold,
            context=config.verify_horizon,
            life_penalty=config.life_penalty,
            keep=config.max_reflections,
        )
        # -- reflection ----------------------------------------------------------------------------------------
        corrections, counts = reflect(backend, trial.candidates, traits, config, seed)
        # -- verification by replay ------------------------------------------------------------------------------
        verdicts: list[Any] = [None] * len(corrections)
        if config.verify and cloning and corrections:
            continuation = (
                PolicyContinuation(_policy(backend, env, config, greedy=True, seed=seed))
                if config.continuation == "model"
                else RandomContinuation()
            )
            verdicts = verify(
                [(c, r.action) for c, r in corrections],
                env,
                continuation,
                horizon=config.verify_horizon,
                keep_ties=config.keep_ties,
                batch=config.batch_size,
                seed=seed,
                life_penalty=config.life_penalty,
            )
        kept = [(c, r) for (c, r), v in zip(corrections, verdicts, strict=True) if v is None or v.kept]
        counts["verified"] = sum(1 for v in verdicts if v is not None and v.kept)
        counts["improved"] = sum(1 for v in verdicts if v is not None and v.proposed_outcome > v.taken_outcome)
        counts["rejected"] = sum(1 for v in verdicts if v is not None and not v.kept)
        counts["unverified"] = sum(1 for v in verdicts if v is None)
        counts["kept"] = len(kept)
        # -- fine-tune on the kept corrections -----------------------------------------------------------------
        # The prompt the policy acted on at the step (its rules and earlier turns), now with the corrected answer.
        examples = [
            Example(step_instructions(c.info, traits.instructions), c.before, r.action_name, actor.turns(c.info))
            for c, r in kept
        ]
        losses = train_answers(
            model.model,
            [model.encode(e) for e in examples],
            model.pad_id,
            TrainSettings(
                config.epochs,
                config.train_batch_size,
                config.learning_rate,
                config.weight_decay,
                config.max_grad_norm,
                seed,
            ),
            compute=model.adapter_compute,
        )
        # -- evaluation, results, checkpoint -------------------------------------------------------------------
        mean, ci = mean_ci95(trial.returns)
        results: dict[str, Any] = {
            "iteration": iteration,
            "trial": {
                "mean_return": mean,
                "ci95": ci,
                "returns": trial.returns,
                "mean_score": sum(trial.scores) / len(trial.scores),
                "episodes": len(trial.returns),
                "steps": sum(trial.lengths),
                "seeds": [config.seed + (iteration - 1) * config.episodes, len(trial.returns)],
            },
            "reflections": {"poor_steps": trial.poor_steps, **counts},
            "finetune": {
                "examples": len(examples),
                "steps": len(losses),
                "first_loss": losses[0] if losses else None,
                "last_loss": losses[-1] if losses else None,
                "losses": losses,
            },
        }
        if config.eval_episodes > 0:
            results["eval"] = evaluate(model.backend(), env, config)
        results["seconds"] = time.perf_counter() - started
        _write_iteration(run, results, corrections, verdicts)
        run.log_scalars(iteration, _scalars(results))
        history.append(results)
        with run.checkpoint(iteration) as directory:
            model.save(directory)
            write_json_atomic(directory / STATE_FILE, {"history": history})
        if config.finetune == "full":
            run.prune_checkpoints(2)  # whole models are large; adapters are kept for every iteration
        for callback in callbacks:
            callback.on_checkpoint(iteration, run.checkpoints_dir / f"step_{iteration}")
        if config.progress:
            _print_iteration(results)

    # -- summary -----------------------------------------------------------------------------------------------
    plot = plot_rewards(history, run.path / "reward_over_iterations.png", env.env_id)
    evals = [h for h in history if "eval" in h]
    if config.progress and len(evals) > 1:
        _print_evaluation(f"after iteration {evals[-1]['iteration']}", evals[-1]["eval"], config)
    trials = [h for h in history if "trial" in h]
    summary = {
        "agent": agent,
        "env_id": env.env_id,
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
        "reflections": {
            key: sum(h["reflections"][key] for h in trials)
            for key in (
                "proposed",
                "parsed",
                "unparsable",
                "unchanged",
                "verified",
                "improved",
                "rejected",
                "unverified",
            )
        },
        "plot": str(plot),
        "checkpoint": str(run.latest_checkpoint()) if run.latest_checkpoint() else None,
    }
    run.write_summary(summary)
    for callback in callbacks:
        callback.on_training_end(len(trials), summary)
    return summary


def _scalars(results: dict[str, Any]) -> dict[str, float]:
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


def _write_iteration(
    run: Run, results: dict[str, Any], corrections: Sequence[Any] = (), verdicts: Sequence[Any] = ()
) -> None:
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


def _print_evaluation(when: str, evaluation: dict[str, Any], config: ReflectionConfig) -> None:
    """One line: the greedy evaluation's mean return with its 95% interval, on which held-out games."""
    from rich.console import Console

    games = len(evaluation["returns"])
    Console().print(
        f"{when}: greedy return {evaluation['mean_return']:.2f} ± {evaluation['ci95']:.2f} (95% CI) on {games} "
        f"held-out games (seeds {config.eval_seed}-{config.eval_seed + games - 1}, cut at {eval_max_steps(config)} "
        "steps)",
        highlight=False,
    )


def _print_iteration(results: dict[str, Any]) -> None:
    from rich.console import Console

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
