"""Where a Trace checkpoint goes wrong token by token: the reference answer fed in, the model's loss and its top-1
choice at every answer token, by the part of the answer the token belongs to.

A greedy answer (what ``trace_answer_lines.py`` reads) shows where the model ends up after its first mistake; one
wrong token early (the first statement of a worked solution, say) and everything after it is off. Teacher forcing
asks, at every position, what the model would write next given the right answer so far, so it separates the parts
the model has learnt from the ones it has not:

- worked solutions (``llm-gym demos --set worked=true``): the ``<think>`` markup; a step's ``statement`` (the
  program's text, copied), its ``substitution`` (names replaced by values), each ``operation``'s result, the line a
  print writes (``printed``, ``debug``); ``step start``, the first token of each step (which statement comes next);
  then the stdout after the block;
- any Trace answer: its stdout lines, ``output debug`` and ``output plain``, and the ``end`` token that closes it.

The demos give the prompts and the reference answers (``llm-gym demos --env Trace-v0 --env-arg level=1 [--set
worked=true] --episodes 16 --seed 10000 --out held_out.jsonl``: seeds the run never trained on); the prompts are
encoded as ``sft`` encodes them for training.

    python scripts/trace_teacher_forced.py CHECKPOINT DEMOS [--demos 16] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import llm_gym  # noqa: F401 - registers the env ids
from llm_gym.agent import EnvConfig, load_policy
from llm_gym.agents.sft.data import DemoEncoder, load_records
from llm_gym.envs.trace.worked import THINK_CLOSE, THINK_OPEN, UnsupportedProgram, worked_solution
from llm_gym.lm.finetune import prompt_and_answer
from llm_gym.lm.prompts import PromptBuilder

STEP_START = "step start"


@dataclass
class TokenRecord:
    kind: str
    loss: float
    right: bool
    step_start: bool


def char_kinds(answer: str, program: str | None) -> tuple[list[str], set[int]]:
    """The kind of every character of ``answer`` and the offsets where a worked step starts. A worked answer is
    split by its solution's parts where its ``<think>`` block is exactly the program's worked solution; otherwise
    (and after the block) lines are ``output debug`` / ``output plain``, newlines ``newline``."""
    kinds: list[str] = []
    starts: set[int] = set()
    rest = answer
    if program is not None and answer.startswith(f"{THINK_OPEN}\n") and THINK_CLOSE in answer:
        try:
            solution = worked_solution(program)
        except UnsupportedProgram:
            solution = None
        block = f"{THINK_OPEN}\n{solution.text}\n{THINK_CLOSE}\n" if solution else ""  # as worked_answer writes it
        if block and solution.parts and answer.startswith(block):
            kinds += ["markup"] * (len(THINK_OPEN) + 1)
            for step in solution.parts:
                starts.add(len(kinds))
                for kind, text in step:
                    kinds += [kind] * len(text)
                kinds.append("newline")
            kinds += ["markup"] * (len(THINK_CLOSE) + 1)
            rest = answer[len(block) :]
    for k, line in enumerate(rest.split("\n")):
        if k:
            kinds.append("newline")
        kinds += ["output debug" if line.startswith("__DBG_") else "output plain"] * len(line)
    return kinds, starts


def token_records(
    model: Any, tokenizer: Any, prompt: Sequence[int], answer_ids: Sequence[int], answer: str, program: str | None
) -> list[TokenRecord]:
    """Teacher-forced loss and top-1 hit of every answer token (the end token last), each with its kind."""
    ids = torch.tensor([[*prompt, *answer_ids]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logprobs = logits.log_softmax(-1)
    target = torch.tensor(answer_ids)
    losses = -logprobs.gather(1, target[:, None]).squeeze(1)
    right = logprobs.argmax(-1) == target
    kinds, starts = char_kinds(answer, program)
    encoded = tokenizer(answer, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoded["input_ids"]) != list(answer_ids[: len(encoded["input_ids"])]):
        raise ValueError("the answer's tokens differ from the encoded demo's; is this the model the run trained?")
    records = []
    for k in range(len(answer_ids)):
        if k < len(encoded["input_ids"]):
            begin, end = encoded["offset_mapping"][k]
            text = answer[begin:end]
            # A token that starts with a newline and goes on belongs with what follows the newline.
            at = begin + 1 if text.startswith("\n") and len(text) > 1 else begin
            kind = kinds[at] if at < len(kinds) else "newline"
            step_start = any(begin <= s < end for s in starts)
        else:
            kind, step_start = "end", False
        records.append(TokenRecord(kind, float(losses[k]), bool(right[k]), step_start))
    return records


def analyse(checkpoint: str, demos: Path, limit: int = 16) -> dict[str, Any]:
    """Per-kind token counts, mean loss and top-1 accuracy over the first ``limit`` demos, and per demo the first
    token the model gets wrong."""
    records = load_records(str(demos), "Trace-v0", max_demos=limit)
    if not records:
        raise SystemExit(f"{demos} holds no Trace-v0 demos")
    env_args = dict(records[0].env_args)
    policy, _ = load_policy(checkpoint, EnvConfig("Trace-v0", env_args))
    backend = policy.backend  # type: ignore[attr-defined]
    model, tokenizer = backend.model, backend.tokenizer
    encoder = DemoEncoder(PromptBuilder(tokenizer, ""), with_end=True)
    env = gym.make("Trace-v0", **env_args)
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    per_demo = []
    try:
        for record in records:
            env.reset(options={"task_id": int(record.task_id)})
            program = env.unwrapped.task.program
            prompt, answer_ids = prompt_and_answer(encoder.encode(record).encoded)
            answer = record.messages[-1]["content"]
            tokens = token_records(model, tokenizer, prompt, answer_ids, answer, program)
            for token in tokens:
                for kind in (token.kind, "all") + ((STEP_START,) if token.step_start else ()):
                    totals[kind][0] += 1
                    totals[kind][1] += token.loss
                    totals[kind][2] += token.right
            miss = next((k for k, t in enumerate(tokens) if not t.right), None)
            per_demo.append({"task_id": record.task_id, "tokens": len(tokens),
                             "first_miss": miss, "first_miss_kind": None if miss is None else tokens[miss].kind})  # fmt: skip
    finally:
        env.close()
    kinds = {kind: {"tokens": n, "loss_per_token": round(loss / n, 4), "top1_accuracy": round(hits / n, 4)}
             for kind, (n, loss, hits) in sorted(totals.items(), key=lambda kv: -kv[1][0])}  # fmt: skip
    return {
        "checkpoint": checkpoint,
        "demos": str(demos),
        "answers": len(records),
        "kinds": kinds,
        "answers_detail": per_demo,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="A run directory (its newest checkpoint) or a checkpoint directory.")
    parser.add_argument("demos", type=Path, help="Trace demos (llm-gym demos ... --out FILE): prompts and answers.")
    parser.add_argument("--demos", dest="limit", type=int, default=16, help="Only the first N demos (default 16).")
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    args = parser.parse_args()
    result = analyse(args.checkpoint, args.demos, args.limit)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['checkpoint']} on {result['answers']} answers of {result['demos']} (teacher-forced)")
    print(f"  {'part':<14} {'tokens':>7} {'loss/token':>11} {'top-1':>7}")
    for kind, row in result["kinds"].items():
        print(f"  {kind:<14} {row['tokens']:>7} {row['loss_per_token']:>11.3f} {row['top1_accuracy']:>7.1%}")
    misses = [d["first_miss_kind"] for d in result["answers_detail"] if d["first_miss"] is not None]
    counts = {k: misses.count(k) for k in sorted(set(misses), key=misses.count, reverse=True)}
    print(f"  first wrong token of each answer, by part: {counts or 'none'}")


if __name__ == "__main__":
    main()
