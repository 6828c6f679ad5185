"""Trace answer scoring time: the capped, linear scorer against the plain one it replaced, in the same run.

The reference (:mod:`llm_gym.envs.trace.scoring_reference`) is the scorer as it was: regexes that go quadratic
on some texts (a long run of spaces before text, many unclosed ``<think>`` tags) and a line-by-line
longest-common-subsequence in pure Python over every line of the answer. Both score the same answers against the same expected output (a typical 12-line Trace output):

* ``typical``: a near-miss answer of 12 lines (what a model usually writes): the common case must not get slower;
* hostile answers of ``--size`` characters: short lines, spaces, unclosed think tags;
* the new scorer alone on 10 MB answers (the reference takes about a minute on one of them).

    python benchmarks/trace_scoring.py [--size 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable

from llm_gym.envs.trace import scoring_reference
from llm_gym.envs.trace.scoring import score

EXPECTED = "\n".join(f"__DBG_{i}__ x={i * 7} total={i * i}" for i in range(12))

# -- measurement ---------------------------------------------------------------------------------------------------


def answers(size: int) -> dict[str, str]:
    typical = EXPECTED.replace("x=21", "x=22").replace("total=64", "total=46")
    return {
        "typical": f"<think>trace the loop</think>\n```output\n{typical}\n```",
        "short_lines": "a\n" * (size // 2),
        "spaces": " " * size + "x",
        "think_tags": "<think>" * (size // 7),
    }


def timed(scorer: Callable[[str, str], object], text: str, repeats: int) -> tuple[float, object]:
    """The best of ``repeats`` timings and the scorer's result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = scorer(text, EXPECTED)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="characters of each hostile answer")
    parser.add_argument("--repeats", type=int, default=3, help="timings per case (the best is kept)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows, agree = {}, True
    for name, text in answers(args.size).items():
        # The reference is quadratic on the hostile answers: time it once there.
        new, result = timed(score, text, args.repeats * (200 if name == "typical" else 1))
        old, reference = timed(scoring_reference.score, text, args.repeats * 200 if name == "typical" else 1)
        agree &= abs(result.partial - reference) < 1e-12  # the caps do not apply at this size: same credit
        rows[name] = {"seconds": new, "reference_seconds": old, "speedup": round(old / new, 1)}
    huge = {name: timed(score, text, 1)[0] for name, text in answers(10_000_000).items() if name != "typical"}
    report = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "hostile_answer_chars": args.size,
        "cases": {
            k: {**v, "seconds": f"{v['seconds']:.2e}", "reference_seconds": f"{v['reference_seconds']:.2e}"}
            for k, v in rows.items()
        },  # fmt: skip
        "ratio_typical_reference_to_new": rows["typical"]["speedup"],
        "same_partial_credit_as_reference": agree,
        "seconds_10MB_answer_new_scorer": {k: round(v, 3) for k, v in huge.items()},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
