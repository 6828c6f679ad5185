"""Tokens per decision, per env family: what a score-mode decision feeds the model, split into the system prompt
(served from its KV cache) and the per-decision part, and the action strings.

Prints JSON. Tokenizer only (plus the model's config for the FLOP split), no forward pass: seconds. For each env, a
few dozen real decisions (Atari: the scripted player with random moves mixed in; OpenSpiel: random legal moves;
Trace level 1: fresh tasks) are rendered by :class:`llm_gym.lm.prompts.PromptBuilder` exactly as the ``hf`` backend
renders them, and per decision it counts

* ``prefix``: the system prompt's tokens (the env's rules; computed once, then read from the KV cache);
* ``per_decision``: the prompt's tokens after the prefix, of which ``observation`` are the observation text's own
  and the rest the chat template's turn markers;
* ``actions``: the legal action strings' tokens (each with the end-of-answer token score mode appends), and
  ``trie_fed``: the tokens of them the packed forward actually runs (the internal nodes of their trie:
  :mod:`llm_gym.lm.packing`);
* ``flops``: the packed forward's FLOPs for the decision (the same count as ``lm_policy_throughput.score_flops``),
  split into the weight matmuls over the fed tokens, attention (the fed tokens against the cached prefix and
  themselves) and the LM head at the predicting positions. ``observation_share`` is the share a compact encoding
  could at most remove: the observation tokens' part of all three.

    python benchmarks/lm_prompt_tokens.py [--model smollm2-135m] [--decisions 24]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gymnasium as gym
import numpy as np

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.agents.baselines import ScriptedPolicy
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import step_instructions
from llm_gym.lm.models import load_tokenizer, resolve_model
from llm_gym.lm.packing import pack
from llm_gym.lm.prompts import PromptBuilder, observation_text

ENVS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("LLMBreakout-text-v0", {}),
    ("LLMBreakout-ascii-v0", {}),
    ("LLMPong-text-v0", {}),
    ("LLMPong-ascii-v0", {}),
    ("OpenSpiel-tic_tac_toe-v0", {}),
    ("OpenSpiel-connect_four-v0", {}),
    ("OpenSpiel-kuhn_poker-v0", {}),
    ("OpenSpiel-leduc_poker-v0", {}),
    ("OpenSpiel-liars_dice-v0", {}),
    ("Trace-v0", {"level": 1}),
)


def decisions(env_id: str, kwargs: dict[str, Any], count: int, seed: int = 0) -> list[tuple[str, Any, list[str]]]:
    """``count`` real (rules, observation, legal action names) triples; names are empty for free-text actions."""
    env, rng = gym.make(env_id, **kwargs), np.random.default_rng(seed)
    traits = EnvTraits.of(env)
    atari = env_id.startswith("LLM")
    scripted = ScriptedPolicy(EnvConfig(env_id, kwargs)) if atari else None
    obs, info = env.reset(seed=seed)
    found: list[tuple[str, Any, list[str]]] = []
    while len(found) < count:
        names = [str(n) for n in info.get("action_names", [])]
        found.append((step_instructions(info, traits.instructions), obs, names))
        if "legal_actions" not in info:  # Trace: one answer per task; a fresh task each time
            obs, info = env.reset(seed=int(rng.integers(2**31)))
            continue
        ids = [int(a) for a in info["legal_actions"]]
        steps = int(rng.integers(1, 6)) if atari else 1  # Atari: states a few frames apart
        for _ in range(steps):
            use_script = scripted is not None and rng.random() < 0.7
            action = scripted.act([obs], [info])[0] if use_script else ids[int(rng.integers(len(ids)))]
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                obs, info = env.reset(seed=int(rng.integers(2**31)))
                break
    env.close()
    return found


def count(tokenizer: Any, config: Any, rules: str, observation: Any, names: list[str], builders: dict) -> dict:
    builder = builders.setdefault(rules, PromptBuilder(tokenizer, rules))
    prompt = builder.encode([observation])[0]
    prefix = len(builder.prefix_ids) if prompt.uses_prefix else 0
    per_decision = len(prompt.ids) - prefix
    observation_tokens = len(tokenizer(observation_text(observation), add_special_tokens=False)["input_ids"])
    choices = [builder.choice_ids(name) for name in names]
    fed, predictors = per_decision, 1
    if choices:
        batch = pack([prompt.ids], [prompt.uses_prefix], [choices], prefix, 0)
        fed, predictors = int(batch.row_lengths[0]), len(batch.predict_row)
    hidden, layers = config.hidden_size, config.num_hidden_layers
    embedding = config.vocab_size * hidden
    head_dim = hidden // config.num_attention_heads
    body = layers * (
        2 * hidden * hidden  # q, o
        + 2 * hidden * config.num_key_value_heads * head_dim  # k, v
        + 3 * hidden * config.intermediate_size  # gate, up, down
    )
    attention = 4 * layers * config.num_attention_heads * head_dim * fed * (len(builder.prefix_ids) + fed)
    flops = {"matmul": 2.0 * body * fed, "attention": float(attention), "lm_head": 2.0 * embedding * predictors}
    total = sum(flops.values())
    observation_flops = 2.0 * body * observation_tokens + attention * observation_tokens / max(fed, 1)
    return {
        "prefix": len(builder.prefix_ids),
        "per_decision": per_decision,
        "observation": observation_tokens,
        "template": per_decision - observation_tokens,
        "actions": sum(len(c) for c in choices),
        "legal_actions": len(choices),
        "trie_fed": fed - per_decision,
        "fed": fed,
        "gflops": total / 1e9,
        "share": {key: value / total for key, value in flops.items()},
        "observation_share": observation_flops / total,
    }


def summarize(rows: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {"decisions": len(rows)}
    for key in ("prefix", "per_decision", "observation", "template", "actions", "legal_actions", "trie_fed", "fed"):
        values = [r[key] for r in rows]
        out[key] = {"mean": float(np.mean(values)), "min": int(min(values)), "max": int(max(values))}
    out["gflops_mean"] = float(np.mean([r["gflops"] for r in rows]))
    out["flops_share_mean"] = {k: float(np.mean([r["share"][k] for r in rows])) for k in rows[0]["share"]}
    out["observation_share_mean"] = float(np.mean([r["observation_share"] for r in rows]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--decisions", type=int, default=24)
    args = parser.parse_args()
    from transformers import AutoConfig

    tokenizer = load_tokenizer(args.model)
    config = AutoConfig.from_pretrained(resolve_model(args.model), local_files_only=True)
    report: dict[str, Any] = {"model": args.model, "decisions_per_env": args.decisions, "envs": {}}
    for env_id, kwargs in ENVS:
        builders: dict[str, PromptBuilder] = {}
        rows = [count(tokenizer, config, *d, builders) for d in decisions(env_id, kwargs, args.decisions)]
        label = env_id + "".join(f" {k}={v}" for k, v in kwargs.items())
        report["envs"][label] = summarize(rows)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
