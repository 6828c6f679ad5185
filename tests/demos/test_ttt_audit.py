"""scripts/ttt_audit.py's exact game values and observation parsing, on real tic-tac-toe observations: every
solver decision of the --all-replies tree is rated optimal by the audit's own minimax."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from llm_gym.agent import EnvConfig
from llm_gym.demos import read_demos
from llm_gym.demos.tree import record_demo_tree
from llm_gym.plugins import get_agent

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ttt_audit.py"
spec = importlib.util.spec_from_file_location("ttt_audit", SCRIPT)
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)  # type: ignore[union-attr]


def test_values_of_known_positions() -> None:
    assert audit.value("xxooxo...", "x", "x") == 1  # x completes the middle column or the diagonal
    assert audit.value("xxooxox..", "x", "o") == -1  # after (2,0), o wins down the right column
    assert audit.value(".........", "x", "x") == 0  # perfect play draws
    assert audit.winner("xxx......") == "x" and audit.winner("xo.......") is None


def test_every_solver_move_in_the_tree_is_optimal(tmp_path: Path) -> None:
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    out = tmp_path / "tree.jsonl"
    record_demo_tree(get_agent("solver")().policy(env), env, out, source={"agent": "solver"})
    for record in read_demos(out):
        board, me, legal, names = audit.parse(record.messages[-2]["content"])
        assert len(board) == 9 and me in "xo" and record.action in legal and len(names) == len(legal)
        other = "o" if me == "x" else "x"
        values = {a: audit.value(board[:a] + me + board[a + 1 :], me, other) for a in legal}
        assert values[record.action] == max(values.values())


def test_the_audit_of_a_checkpoint_writes_the_positions_it_gets_wrong(tmp_path: Path) -> None:
    """The whole script on a tiny random sft checkpoint: its JSON counts and ``--failed-out`` agree, and every line
    written is a solver demo of a position the checkpoint's greedy move is suboptimal in."""
    import json
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
    from sft_demos import sft_settings  # tests/agents/sft_demos.py

    from llm_gym.agents.sft import SFTAgent
    from llm_gym.config import to_dict
    from llm_gym.lm.testing import make_tiny_model
    from llm_gym.runs import Run

    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    tree = tmp_path / "tree.jsonl"
    record_demo_tree(get_agent("solver")().policy(env), env, tree, source={"agent": "solver"})
    model = make_tiny_model(tmp_path / "tiny-lm", layers=2, hidden=64, init_std=0.1)
    config = sft_settings(model, tree, max_demos=16, epochs=1)
    run = Run.create(env.env_id, "sft", to_dict(config), path=tmp_path / "run")
    try:
        summary = SFTAgent(config).train(env, run)
    finally:
        run.close()
    failed = tmp_path / "failed.jsonl"
    out = subprocess.run(
        [sys.executable, str(SCRIPT), summary["checkpoint"], "--demos", str(tree), "--failed-out", str(failed)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(out.stdout)
    assert report["positions"] == len(read_demos(tree)) == 545
    assert report["suboptimal"] > 0  # an untrained tiny model errs somewhere
    lines = read_demos(failed)
    assert len(lines) == report["suboptimal"]  # one system text in this tree, so one line per failed position
    for record in lines:
        board, me, legal, _ = audit.parse(record.messages[-2]["content"])
        other = "o" if me == "x" else "x"
        values = {a: audit.value(board[:a] + me + board[a + 1 :], me, other) for a in legal}
        assert values[record.action] == max(values.values())
