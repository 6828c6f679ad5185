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
