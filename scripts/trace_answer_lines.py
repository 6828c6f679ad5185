"""Where Trace answers go wrong, line by line, against the generator's ground truth.

Reads the answers of an evaluation (a JSONL file from ``llm-gym demos --agent RUN --env Trace-v0 --env-arg
scoring=partial ...``, or a JSON file with an ``episodes`` list of ``task_id`` / ``answer`` / ``partial``, as in
``docs/results/trace_l1_*``), rebuilds each task from its id and prints what the exact-match rate hides: answers
that stop, the right number of lines, debug lines and plain lines right at their place, ``name=value`` pairs of the
debug lines right, and for answers with a worked solution (``--set worked=true`` demos) the share of its steps
written exactly and of the values they end on.

    python scripts/trace_answer_lines.py eval.jsonl [more.jsonl ...] [--level 1] [--tasks N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym

import llm_gym  # noqa: F401 - registers the env ids
from llm_gym.envs.trace.scoring import extract_answer, normalise
from llm_gym.envs.trace.worked import THINK_CLOSE, THINK_OPEN, UnsupportedProgram, worked_solution

_PAIR = re.compile(r"(\w+)=(.*?)(?= \w+=|$)")


def load_answers(path: Path) -> list[dict[str, Any]]:
    """(task_id, answer, partial) of each episode of a demos JSONL or a results JSON."""
    text = path.read_text()
    if path.suffix == ".json":
        return [{"task_id": e["task_id"], "answer": e["answer"], "partial": e.get("partial")}
                for e in json.loads(text)["episodes"]]  # fmt: skip
    rows = []
    for line in text.splitlines():
        record = json.loads(line)
        rows.append({"task_id": record["task_id"], "answer": record["messages"][-1]["content"],
                     "partial": record.get("reward")})  # fmt: skip
    return rows


def split_work(answer: str) -> tuple[str | None, bool]:
    """(the worked solution in the answer's ``<think>`` block or None, whether the block was closed)."""
    if THINK_OPEN not in answer:
        return None, False
    work, closed, _ = answer.partition(THINK_OPEN)[2].partition(THINK_CLOSE)
    return work.strip("\n"), bool(closed)


def answer_lines(text: str) -> list[str]:
    """The answer's lines as the env compares them (its own extraction and normalisation)."""
    normalised = normalise(extract_answer(text))
    return normalised.split("\n") if normalised else []


def compare(rows: list[dict[str, Any]], level: int) -> dict[str, Any]:
    env = gym.make("Trace-v0", level=level)
    counts: Counter[str] = Counter()
    partials = []
    try:
        for row in rows:
            env.reset(options={"task_id": int(row["task_id"])})
            task = env.unwrapped.task
            expected = answer_lines(task.expected)
            work, closed = split_work(row["answer"])
            got = answer_lines(row["answer"])
            counts["answers"] += 1
            counts["exact"] += got == expected
            counts["right line count"] += len(got) == len(expected)
            if row.get("partial") is not None:
                partials.append(float(row["partial"]))
            kinds = value_kinds(task.program, len(expected))
            for k, line in enumerate(expected):
                kind = "debug" if line.startswith("__DBG_") else "plain"
                counts[f"{kind} lines"] += 1
                counts[f"{kind} lines right"] += k < len(got) and got[k] == line
                if kind == "debug":
                    theirs = dict(_PAIR.findall(got[k].split(" ", 1)[1])) if k < len(got) and " " in got[k] else {}
                    for name, value in _PAIR.findall(line.split(" ", 1)[1]):
                        kind = kinds[k].get(name, "computed")
                        counts["debug values"] += 1
                        counts["debug values right"] += theirs.get(name) == value
                        counts[f"debug values {kind}"] += 1
                        counts[f"debug values {kind} right"] += theirs.get(name) == value
            if work is not None:
                _count_steps(counts, work, task.program, closed)
    finally:
        env.close()
    summary: dict[str, Any] = dict(counts)
    summary["mean partial"] = round(sum(partials) / len(partials), 4) if partials else None
    return summary


def value_kinds(program: str, lines: int) -> list[dict[str, str]]:
    """Per printed line, how each name's value at that point was bound: ``literal`` (assigned a constant, so a
    debug line copies it from the program) or ``computed`` (an expression or an update). Straight-line programs, one
    line per print; anything else gives no kinds (every value then counts as computed)."""
    latest: dict[str, str] = {}
    out: list[dict[str, str]] = []
    for stmt in ast.parse(program).body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            literal = isinstance(stmt.value, ast.Constant) or (
                isinstance(stmt.value, ast.UnaryOp) and isinstance(stmt.value.operand, ast.Constant)
            )
            latest[stmt.targets[0].id] = "literal" if literal else "computed"
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            latest[stmt.target.id] = "computed"
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and getattr(stmt.value.func, "id", "") == "print"
        ):
            out.append(dict(latest))
        elif not isinstance(stmt, ast.FunctionDef):
            return [{} for _ in range(lines)]
    return out if len(out) == lines else [{} for _ in range(lines)]


def _count_steps(counts: Counter[str], work: str, program: str, closed: bool) -> None:
    counts["worked answers"] += 1
    counts["worked answers closed"] += closed
    try:
        truth = worked_solution(program).steps
    except UnsupportedProgram:
        return
    written = work.split("\n")
    for k, step in enumerate(truth):
        theirs = written[k] if k < len(written) else ""
        counts["steps"] += 1
        counts["steps right"] += theirs == step
        counts["step values right"] += _final(theirs) == _final(step)


def _final(step: str) -> str:
    """The value a step ends on: the printed line of a print, else the last form of the chain."""
    if " -> " in step:
        return step.rsplit(" -> ", 1)[1]
    return step.rsplit(" = ", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=0, help="Only each file's first N answers (0: all).")
    parser.add_argument("--json", action="store_true", help="Print JSON instead of lines.")
    args = parser.parse_args()
    results = {str(path): compare(load_answers(path)[: args.tasks or None], args.level) for path in args.files}
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for path, summary in results.items():
        print(path)
        for key, value in summary.items():
            total = {"exact": "answers", "right line count": "answers", "debug lines right": "debug lines",
                     "debug values literal right": "debug values literal",
                     "debug values computed right": "debug values computed",
                     "plain lines right": "plain lines", "debug values right": "debug values",
                     "worked answers closed": "worked answers", "steps right": "steps",
                     "step values right": "steps"}.get(key)  # fmt: skip
            shown = f"{value} of {summary[total]}" if total and summary.get(total) else value
            print(f"  {key}: {shown}")


if __name__ == "__main__":
    main()
