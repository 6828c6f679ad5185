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
from llm_gym.agents.reflection.report import (
    iteration_scalars,
    print_evaluation,
    print_iteration,
    summarize,
    write_iteration,
)
from llm_gym.agents.reflection.trial import Candidate, TrialResult, play_trial
from llm_gym.agents.reflection.verify import PolicyContinuation, RandomContinuation, verify
from llm_gym.atomic import write_json_atomic
from llm_gym.callbacks import Callback
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import step_instructions
from llm_gym.lm.backends import GenerateRequest, LMBackend, ScoreRequest
from llm_gym.lm.finetune import Example, TrainSettings, train_answers
from llm_gym.lm.policy import LMPolicy
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
    """Run the iterations not yet done (all of them, or those after ``--resume``'s checkpoint); return the summary."""
    configure_threads(config.threads)
    torch.manual_seed(config.seed)
    traits = EnvTraits.probe(env)
    history = _load_state(run.resumed_from)
    model = ReflectionModel(config, run.resumed_from)
    start = (history[-1]["iteration"] + 1) if history else 1
    for callback in callbacks:
        callback.on_training_start(env.env_id, config, start - 1)
    if not history and config.eval_episodes > 0:
        history.append(evaluate_zero_shot(model, env, config, run))
    for iteration in range(start, config.iterations + 1):
        started = time.perf_counter()
        seed = config.seed * 1000 + iteration
        backend = model.backend()
        actor = _policy(backend, env, config, greedy=config.trial_greedy, seed=seed)
        trial = run_trial(actor, env, config, iteration)  # -- trial
        corrections, counts = reflect(backend, trial.candidates, traits, config, seed)  # -- reflection
        verdicts = verify_corrections(backend, env, config, corrections, traits.snapshots, seed)  # -- replay
        kept = keep_verified(corrections, verdicts, counts)
        examples, losses = finetune(model, actor, kept, traits, config, seed)  # -- fine-tune on the kept ones
        results = iteration_results(iteration, trial, counts, examples, losses, config)
        if config.eval_episodes > 0:
            results["eval"] = evaluate(model.backend(), env, config)  # -- evaluation
        results["seconds"] = time.perf_counter() - started
        record_iteration(run, model, history, results, corrections, verdicts, callbacks, config)  # -- checkpoint
    return finish(run, history, env, config, agent, callbacks)


def evaluate_zero_shot(model: ReflectionModel, env: EnvConfig, config: ReflectionConfig, run: Run) -> dict[str, Any]:
    """Iteration 0: the untrained model's evaluation, written and logged as the iterations' are."""
    zero_shot = {"iteration": 0, "eval": evaluate(model.backend(), env, config)}
    write_iteration(run, zero_shot)
    run.log_scalars(0, {"eval/mean_return": zero_shot["eval"]["mean_return"]})
    if config.progress:
        print_evaluation("before training", zero_shot["eval"], config, eval_max_steps(config))
    return zero_shot


def run_trial(actor: LMPolicy, env: EnvConfig, config: ReflectionConfig, iteration: int) -> TrialResult:
    """The iteration's episodes (seeds of its own), with the poor steps picked for reflection."""
    return play_trial(
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


def verify_corrections(
    backend: LMBackend, env: EnvConfig, config: ReflectionConfig, corrections: Sequence[tuple[Candidate, Reflection]],
    cloning: bool, seed: int,
) -> list[Any]:  # fmt: skip
    """Each correction replayed from its step against the action taken (where the env can clone its state and
    ``verify`` is on); None for a correction not replayed."""
    if not (config.verify and cloning and corrections):
        return [None] * len(corrections)
    continuation = (
        PolicyContinuation(_policy(backend, env, config, greedy=True, seed=seed))
        if config.continuation == "model"
        else RandomContinuation()
    )
    return verify(
        [(c, r.action) for c, r in corrections],
        env,
        continuation,
        horizon=config.verify_horizon,
        keep_ties=config.keep_ties,
        batch=config.batch_size,
        seed=seed,
        life_penalty=config.life_penalty,
    )


def keep_verified(
    corrections: Sequence[tuple[Candidate, Reflection]], verdicts: Sequence[Any], counts: dict[str, int]
) -> list[tuple[Candidate, Reflection]]:
    """The corrections the replay kept (or did not judge), counting verified, improved, rejected and unverified."""
    kept = [(c, r) for (c, r), v in zip(corrections, verdicts, strict=True) if v is None or v.kept]
    counts["verified"] = sum(1 for v in verdicts if v is not None and v.kept)
    counts["improved"] = sum(1 for v in verdicts if v is not None and v.proposed_outcome > v.taken_outcome)
    counts["rejected"] = sum(1 for v in verdicts if v is not None and not v.kept)
    counts["unverified"] = sum(1 for v in verdicts if v is None)
    counts["kept"] = len(kept)
    return kept


def finetune(
    model: ReflectionModel, actor: LMPolicy, kept: Sequence[tuple[Candidate, Reflection]], traits: EnvTraits,
    config: ReflectionConfig, seed: int,
) -> tuple[list[Example], list[float]]:  # fmt: skip
    """Fine-tune on the kept corrections: the prompt the policy acted on at the step (its rules and earlier turns),
    now with the corrected answer. Returns the examples and the training losses."""
    examples = [
        Example(step_instructions(c.info, traits.instructions), c.before, r.action_name, actor.turns(c.info))
        for c, r in kept
    ]
    settings = TrainSettings(
        config.update_epochs,
        config.minibatch_size,
        config.learning_rate,
        config.weight_decay,
        config.max_grad_norm,
        seed,
    )
    losses = train_answers(
        model.model, [model.encode(e) for e in examples], model.pad_id, settings, compute=model.adapter_compute
    )
    return examples, losses


def iteration_results(
    iteration: int, trial: TrialResult, counts: dict[str, int], examples: Sequence[Example], losses: Sequence[float],
    config: ReflectionConfig,
) -> dict[str, Any]:  # fmt: skip
    """What ``iteration_N/results.json`` holds of the trial, the reflections and the fine-tune."""
    mean, ci = mean_ci95(trial.returns)
    return {
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


def record_iteration(
    run: Run, model: ReflectionModel, history: list[dict[str, Any]], results: dict[str, Any],
    corrections: Sequence[Any], verdicts: Sequence[Any], callbacks: Sequence[Callback], config: ReflectionConfig,
) -> None:  # fmt: skip
    """The iteration's files and scalars, then checkpoint ``step_N`` (the model and the history so far)."""
    iteration = results["iteration"]
    write_iteration(run, results, corrections, verdicts)
    run.log_scalars(iteration, iteration_scalars(results))
    history.append(results)
    with run.checkpoint(iteration) as directory:
        model.save(directory)
        write_json_atomic(directory / STATE_FILE, {"history": history})
    if config.finetune == "full":
        run.prune_checkpoints(2)  # whole models are large; adapters are kept for every iteration
    for callback in callbacks:
        callback.on_checkpoint(iteration, run.checkpoints_dir / f"step_{iteration}")
    if config.progress:
        print_iteration(results)


def finish(
    run: Run, history: Sequence[dict[str, Any]], env: EnvConfig, config: ReflectionConfig, agent: str,
    callbacks: Sequence[Callback],
) -> dict[str, Any]:  # fmt: skip
    """The reward plot, the last evaluation's line, ``summary.json``."""
    plot = plot_rewards(history, run.path / "reward_over_iterations.png", env.env_id)
    evals = [h for h in history if "eval" in h]
    if config.progress and len(evals) > 1:
        when = f"after iteration {evals[-1]['iteration']}"
        print_evaluation(when, evals[-1]["eval"], config, eval_max_steps(config))
    summary = summarize(history, agent, env.env_id, config, plot, run.latest_checkpoint())
    run.write_summary(summary)
    for callback in callbacks:
        callback.on_training_end(summary["iterations"], summary)
    return summary
