"""Ask learning-demo checkpoints again, in a new process: the demonstrator's positions in each run's held-out games
and the positions only random play reaches there (as ``make demo``'s report does), each answered by the run's
final checkpoint loaded as ``llm-gym play`` loads it. Reads each run's ``learning_demo.json`` (its checkpoint and
evaluation seeds) and prints one line per run; ``--json`` writes every answer.

    python scripts/learning_demo_positions.py RUN/learning_demo.json [...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.learning_demo.agreement import agreement
from llm_gym.learning_demo.config import LearningDemoConfig
from llm_gym.learning_demo.pipeline import held_out_positions, sft_settings
from llm_gym.learning_demo.report import position_labels
from llm_gym.plugins import get_agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="learning_demo.json files")
    parser.add_argument("--json", type=Path, default=None, help="write every answer here")
    args = parser.parse_args()
    out = {}
    for path in args.results:
        result = json.loads(path.read_text())
        config = LearningDemoConfig(**result["config"])
        env = EnvConfig(config.env_id)
        reached, unreached = held_out_positions(get_agent(config.demonstrator)().policy(env), env, config)
        sft = get_agent("sft")
        settings = sft.Config(**sft_settings(config, Path(result["demos"])))  # the run's sft settings, as the demo's
        policy = sft(settings).policy(env, Path(result["checkpoint"]))  # loaded as `llm-gym play` loads it
        seen, unseen = agreement(policy, "after", reached), agreement(policy, "after", unreached)
        out[str(path)] = {"checkpoint": result["checkpoint"], "reached": seen.as_dict(),
                          "unreached": unseen.as_dict(), "unreached_labels": position_labels(unreached),
                          "demonstrator": [p.name(p.action) for p in unreached]}  # fmt: skip
        print(
            f"{path}: {seen.agreed_positions}/{len(reached)} positions, {seen.agreed_decisions}/{reached.decisions} "
            f"decisions; in no demonstration {unseen.agreed_positions}/{len(unreached)} "
            f"(answers {unseen.as_dict()['answers']}, demonstrator {out[str(path)]['demonstrator']})"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
