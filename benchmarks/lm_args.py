"""The arguments every benchmark that times a language model takes, declared once so that ``--threads 0`` means the
same in all of them. A sibling module: the benchmarks run as ``python benchmarks/NAME.py``, which puts this folder on
``sys.path``."""

from __future__ import annotations

import argparse

from llm_gym.lm.runtime import configure_threads


def lm_parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first line, with ``--model``, ``--rounds`` and ``--threads``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: one per available core)")
    return parser


def parse_lm_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The command line's arguments, with torch's threads set from ``--threads`` before any model loads."""
    args = parser.parse_args()
    configure_threads(args.threads)
    return args
