"""Action-prior calibration (``action_prior=calibrated``): a fixed log-probability offset per action name, added to
each legal action's likelihood before the softmax, so that the policy a run starts from picks every action about
equally often on average over the env's states, while keeping how its preferences change from state to state.

Why: in score mode the policy is the LM's likelihood of each action's name as the answer, and that carries a prior
over the names that has nothing to do with the game. On Breakout the default model gives LEFT 1-2% in every state
(RIGHT about 50%, FIRE about 40%), so PPO almost never sees what LEFT does, and runs that never raised it collapsed
onto FIRE or RIGHT (``docs/results/ppo_lora_breakout.md``, "which runs made the action depend on the ball's side"). The same idea
is known for in-context classification as contextual calibration (Zhao et al. 2021, "Calibrate Before Use").

How: before the first rollout, ``calibration_states`` states are collected by random legal play in envs of their
own (seeds apart from training's), the starting policy scores every legal action in each, and the offsets are
fitted so that the offset policy's mean probability of each action over those states equals that of a uniform
choice among the legal ones. The offsets are saved with every checkpoint (``action_bias.json``) and used wherever
the policy acts: the rollout, the update (old and new log-probabilities and the reference all carry them, so the
PPO ratio and the KL are those of the offset policy), the vLLM rollout engine, ``play``, ``bench`` and
``export`` (which copies the file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.files import ACTION_BIAS_FILE
from llm_gym.envs.protocol import legal_choices
from llm_gym.errors import CheckpointError
from llm_gym.lm.scoring import categorical_logprobs
from llm_gym.stepping import EnvStepper, make_vector_env

CALIBRATION_SEED_OFFSET = 20_000
"""Calibration envs use seeds seed + 20,000 + i: apart from training's and from evaluation's (+10,000)."""
CALIBRATION_ENVS = 8
"""Envs played at once while collecting states: fewer envs, more steps each, so the states reach past the start."""


def fit_action_bias(
    rows: Sequence[tuple[Sequence[str], np.ndarray]], iterations: int = 1000, tolerance: float = 1e-7
) -> dict[str, float]:
    """Offsets per action name such that, over ``rows`` (each: a state's legal action names and the policy's
    log-probabilities over them), the mean probability of each action under ``softmax(logp + offset)`` equals its
    mean under a uniform choice among the legal actions. Fixed-point iteration (each step moves every offset by the
    log of its target over its current mean); the offsets are centred on 0, which changes no probability."""
    names, logp = _table(rows)
    legal_mask = np.isfinite(logp)
    target = (legal_mask / legal_mask.sum(1, keepdims=True)).mean(0)
    bias = np.zeros(len(names))
    for _ in range(iterations):
        step = np.log(target) - np.log(_softmax_rows(logp + bias).mean(0))
        bias = bias + step
        bias -= bias.mean()
        if np.abs(step).max() < tolerance:
            break
    return dict(zip(names, bias.tolist(), strict=True))


def mean_probabilities(
    rows: Sequence[tuple[Sequence[str], np.ndarray]], bias: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Each action's mean probability over ``rows`` (0 where it is not legal), with the ``bias`` offsets applied."""
    names, logp = _table(rows)
    offsets = np.array([(bias or {}).get(name, 0.0) for name in names])
    return dict(zip(names, _softmax_rows(logp + offsets).mean(0).tolist(), strict=True))


def _table(rows: Sequence[tuple[Sequence[str], np.ndarray]]) -> tuple[list[str], np.ndarray]:
    """The action names of ``rows`` (sorted) and a (states, names) table of their log-probabilities, -inf where an
    action is not legal."""
    names = sorted({name for legal, _ in rows for name in legal})
    column = {name: i for i, name in enumerate(names)}
    logp = np.full((len(rows), len(names)), -np.inf)
    for k, (legal, values) in enumerate(rows):
        logp[k, [column[name] for name in legal]] = np.asarray(values, dtype=np.float64)
    return names, logp


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(1, keepdims=True)


def calibration_rows(
    ac: Any, env: EnvConfig, states: int, seed: int, max_episode_steps: int = 0
) -> list[tuple[list[str], np.ndarray]]:
    """``states`` states of ``env`` reached by random legal play (``CALIBRATION_ENVS`` envs, seeds ``seed`` + i), each
    with its legal action names and the log-probabilities ``ac``'s policy gives them without offsets. The envs play
    the env's own task: a curriculum's sampler is not consulted (it would move its state)."""
    # The acting path loads transformers and peft (seconds); this module loads with `llm-gym export`, in every CLI run.
    from llm_gym.agents.ppo_lora.acting import rules_of, turns_of

    envs = min(CALIBRATION_ENVS, states)
    stepper = EnvStepper(make_vector_env(env, envs, text_actions=False, max_episode_steps=max_episode_steps), seed=seed)
    rng = np.random.default_rng(seed)
    rows: list[tuple[list[str], np.ndarray]] = []
    try:
        stepper.reset()
        while len(rows) < states:
            observations, infos = list(stepper.observations), list(stepper.infos)
            prompts = ac.encode(observations, rules_of(ac, infos), turns_of(infos))
            legal = [legal_choices(info, env.env_id) for info in infos]
            continuations = [ac.choices(names) for _, names in legal]
            batch = ac.pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], continuations)
            batch.seq_bias = None  # what is being measured: the model's own preferences
            with torch.no_grad():
                out, _ = ac.top(ac.bottom(batch), batch, "rollout")
            logp = categorical_logprobs(out.seq_logprobs, batch.seq_row, len(prompts)).double().cpu().numpy()
            for i, (_, names) in enumerate(legal):
                rows.append((list(names), logp[i, : len(names)]))
            stepper.step([int(ids[rng.integers(len(ids))]) for ids, _ in legal])
    finally:
        stepper.close()
    return rows[:states]


def save_action_bias(directory: Path, bias: Mapping[str, float]) -> None:
    """Write the offsets beside a checkpoint's adapter (nothing when there are none)."""
    if bias:
        (Path(directory) / ACTION_BIAS_FILE).write_text(json.dumps(dict(sorted(bias.items())), indent=1) + "\n")


def load_action_bias(directory: Path | None) -> dict[str, float]:
    """A checkpoint's offsets, or none where it has no ``action_bias.json`` (a run without calibration, an sft
    checkpoint)."""
    if directory is None:
        return {}
    path = Path(directory) / ACTION_BIAS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {str(name): float(value) for name, value in data.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise CheckpointError(
            f"{path} is not a JSON object of action name -> offset ({exc}); rewrite or remove it"
        ) from exc
