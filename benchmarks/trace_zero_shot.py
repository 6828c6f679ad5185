"""Zero-shot Trace-v0 score of a language model, per level: exact-match rate and mean partial credit (JSON).

The model answers each task once, greedily, from the env's instructions (system prompt) and observation, through
the LM runtime (``llm_gym.lm``, the ``hf`` backend by default). The same task ids are used for every model.

    python benchmarks/trace_zero_shot.py [--model smollm2-135m] [--tasks 20] [--max-new-tokens 320]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from llm_gym.envs.trace.env import TraceEnv
from llm_gym.envs.trace.generator import LEVELS
from llm_gym.lm import GenerateRequest, make_backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="model name, local directory or cached HF id")
    parser.add_argument("--backend", default="hf", help="LM backend (hf, openai, vllm)")
    parser.add_argument("--tasks", type=int, default=20, help="tasks per level (task ids 0..N-1)")
    parser.add_argument("--max-new-tokens", type=int, default=320, help="answer length budget")
    parser.add_argument("--threads", type=int, default=0, help="hf backend: torch threads (0: all cores)")
    args = parser.parse_args()
    options = {"threads": args.threads} if args.backend == "hf" else {}
    backend = make_backend(args.backend, args.model, **options)
    report: dict[str, object] = {"model": args.model, "backend": args.backend, "tasks_per_level": args.tasks,
                                 "max_new_tokens": args.max_new_tokens, "python": platform.python_version()}  # fmt: skip
    start = time.perf_counter()
    for level in LEVELS:
        env = TraceEnv(level=level)
        observations = [env.reset(options={"task_id": i})[0] for i in range(args.tasks)]
        requests = [GenerateRequest(env.instructions, obs) for obs in observations]
        completions = backend.generate(requests, max_new_tokens=args.max_new_tokens, temperature=0.0, seed=0)
        exact, partial, cut = [], [], []
        for task_id, completion in enumerate(completions):
            env.reset(options={"task_id": task_id})
            _, _, _, _, info = env.step(completion.text)
            exact.append(info["exact"])
            partial.append(info["partial"])
            cut.append(not completion.stopped)
        report[f"level_{level}"] = {
            "exact_match_rate": sum(exact) / len(exact),
            "mean_partial": round(sum(partial) / len(partial), 4),
            "answers_cut_at_max_new_tokens": sum(cut),
        }
        print(f"level {level}: {report[f'level_{level}']}", file=sys.stderr, flush=True)  # progress: runs are long
    report["seconds"] = round(time.perf_counter() - start, 1)
    backend.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
