"""Decisions/s of the hf-vision backend's score mode against a naive per-observation ``generate``, with the same
image+text model in the same run, as a ratio.

Prints JSON. Observations are real LLMPong-vision-v0 frames and texts. Score mode = ``VisionBackend.score`` on N
observations at once (one packed forward: the system prompt from its KV cache, each image through the vision
encoder once, every legal action scored exactly). Naive = for each observation, the processor on the full prompt,
then transformers' ``model.generate(max_new_tokens=10, do_sample=True)`` and the shared parser, the way the seed
decided. Both run in interleaved rounds and the ratio is the median of per-round ratios, so load from other
processes on a shared machine hits both alike.

The model is a random Idefics3 (SmolVLM's architecture) built from a config, since no weights can be downloaded
here: ``--preset smolvlm-256m`` has SmolVLM-256M's shapes (SmolLM2-135M text model, a 12-layer 768-wide SigLIP at
512 px, 64 image tokens); ``--preset cpu-small`` (the default on this 2-core machine) keeps the text model's width
with 8 layers and a 4-layer 384-wide encoder at 256 px (16 image tokens). ``--model DIR`` measures a real local
model instead.

    python benchmarks/vlm_throughput.py [--preset cpu-small|smolvlm-256m] [--model DIR] [--rounds 3] [--threads 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.actions import parse_action
from llm_gym.agent import EnvConfig
from llm_gym.lm.backends import ScoreRequest
from llm_gym.lm.vision.backend import VisionBackend
from llm_gym.lm.vision.prompts import VisionPromptBuilder

ENV = "LLMPong-vision-v0"
PRESETS = {
    "cpu-small": {"layers": 8, "hidden": 576, "vision_hidden": 384, "vision_layers": 4, "image_size": 256},
    "smolvlm-256m": {"layers": 30, "hidden": 576, "vision_hidden": 768, "vision_layers": 12, "image_size": 512},
}


def build_model(preset: str, directory: Path) -> Path:
    """A random Idefics3 with the preset's shapes and the tiny processor (the tokenizer does not change the cost
    of a forward pass beyond the prompt length; the SmolLM2 vocabulary size is kept for the LM head)."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    from llm_gym.lm.vision.testing import make_tiny_vision_model

    shape = PRESETS[preset]
    make_tiny_vision_model(directory, image_size=shape["image_size"], patch_size=16)
    config = Idefics3Config.from_pretrained(directory)
    config.text_config.hidden_size = shape["hidden"]
    config.text_config.intermediate_size = 1536
    config.text_config.num_hidden_layers = shape["layers"]
    config.text_config.num_attention_heads = 9
    config.text_config.num_key_value_heads = 3
    config.text_config.head_dim = 64
    config.text_config.vocab_size = 49_280  # SmolVLM's; the tiny tokenizer uses the first ids only
    config.vision_config.hidden_size = shape["vision_hidden"]
    config.vision_config.intermediate_size = 4 * shape["vision_hidden"]
    config.vision_config.num_hidden_layers = shape["vision_layers"]
    config.vision_config.num_attention_heads = 12 if shape["vision_hidden"] == 768 else 6
    config.scale_factor = 4  # SmolVLM-256M's pixel shuffle: 16 patches per image token
    torch.manual_seed(0)
    model = Idefics3ForConditionalGeneration(config)
    model.save_pretrained(directory)
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(directory)
    patches = (shape["image_size"] // 16) ** 2 // config.scale_factor**2
    processor.image_seq_len = patches
    processor.save_pretrained(directory)
    return directory


def observations(count: int) -> tuple[list[dict], list[dict], str]:
    env, rng = EnvConfig(ENV).make(), np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    states, infos = [], []
    while len(states) < count:
        obs, _, terminated, truncated, info = env.step(int(rng.integers(6)))
        if rng.random() < 0.3:
            states.append(obs)
            infos.append(info)
        if terminated or truncated:
            obs, info = env.reset()
    instructions = env.unwrapped.instructions
    env.close()
    return states, infos, instructions


def naive_decision(backend: VisionBackend, builder: VisionPromptBuilder, observation: dict, info: dict) -> int | None:
    """The seed's way: the whole prompt through the processor, ``generate`` 10 tokens, parse."""
    inputs = backend.processor(
        text=[builder.text(observation)], images=[[observation["image"]]], add_special_tokens=False, return_tensors="pt"
    )
    with torch.inference_mode():
        out = backend.model.generate(**inputs, max_new_tokens=10, do_sample=True)
    text = backend.tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return parse_action(text, list(info["action_names"]), list(info["legal_actions"])).action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu-small")
    parser.add_argument("--model", default=None, help="a local image+text model directory (instead of a preset)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="observations per score call")
    parser.add_argument("--naive", type=int, default=2, help="naive decisions per round")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or str(build_model(args.preset, Path(tmp) / "model"))
        backend = VisionBackend(model_dir, dtype="float32", threads=args.threads, batch_size=args.batch)
        states, infos, instructions = observations(args.batch + args.naive)
        builder, _ = backend.prompt_builder(instructions)
        requests = [ScoreRequest(instructions, s, tuple(i["action_names"])) for s, i in zip(states, infos, strict=True)]
        backend.score(requests[: args.batch])  # warm-up (and the prefix cache, made once per run anyway)
        naive_decision(backend, builder, states[0], infos[0])
        rounds = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            backend.score(requests[: args.batch])
            score_rate = args.batch / (time.perf_counter() - started)
            started = time.perf_counter()
            for s, i in zip(states[args.batch :], infos[args.batch :], strict=True):
                naive_decision(backend, builder, s, i)
            naive_rate = args.naive / (time.perf_counter() - started)
            rounds.append({"score_decisions_per_s": score_rate, "naive_decisions_per_s": naive_rate})
        prompt = builder.encode(states[:1])[0]
        result = {
            "benchmark": "vlm_throughput",
            "model": args.model or f"random Idefics3, preset {args.preset}",
            "parameters_millions": round(sum(p.numel() for p in backend.model.parameters()) / 1e6, 1),
            "prompt_tokens": len(prompt.ids),
            "image_tokens": prompt.ids.count(backend.tokenizer.convert_tokens_to_ids("<image>")),
            "legal_actions": len(infos[0]["action_names"]),
            "batch": args.batch,
            "threads": torch.get_num_threads(),
            "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
            "rounds": rounds,
            "score_decisions_per_s": statistics.median(r["score_decisions_per_s"] for r in rounds),
            "naive_decisions_per_s": statistics.median(r["naive_decisions_per_s"] for r in rounds),
            "ratio": statistics.median(r["score_decisions_per_s"] / r["naive_decisions_per_s"] for r in rounds),
        }
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
