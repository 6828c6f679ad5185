"""scripts/ttt_audit.py's exact game values and observation parsing, on real tic-tac-toe observations: every
solver decision of the --all-replies tree is rated optimal by the audit's own minimax; the whole audit, a walk of a
checkpoint's own play against every reply (`--walk`) and scripts/ttt_focus_rounds.sh on a tiny sft checkpoint."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.demos import DemoRecord, read_demos
from llm_gym.demos.tree import record_demo_tree
from llm_gym.plugins import get_agent

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ttt_audit.py"
ROUNDS = SCRIPT.with_name("ttt_focus_rounds.sh")
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
        assert _optimal(record)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(solver tree under the MCTS text, tiny model dir, a tiny sft checkpoint trained briefly on the tree)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
    from sft_demos import sft_settings  # tests/agents/sft_demos.py

    from llm_gym.agents.sft import SFTAgent
    from llm_gym.config import to_dict
    from llm_gym.lm.testing import make_tiny_model
    from llm_gym.runs import Run

    root = tmp_path_factory.mktemp("audit")
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0", {"opponent": "mcts"})
    tree = root / "tree.jsonl"
    record_demo_tree(get_agent("solver")().policy(env), env, tree, source={"agent": "solver"})
    model = make_tiny_model(root / "tiny-lm", layers=2, hidden=64, init_std=0.1)
    config = sft_settings(model, tree, max_demos=16, epochs=1)
    run = Run.create(env.env_id, "sft", to_dict(config), path=root / "run")
    try:
        summary = SFTAgent(config).train(env, run)
    finally:
        run.close()
    return tree, model, Path(summary["checkpoint"])


def _optimal(record: DemoRecord) -> bool:
    board, me, legal, _ = audit.parse(record.messages[-2]["content"])
    values = audit.move_values(board, me, legal)
    return values[record.action] == max(values.values())


def test_the_audit_of_a_checkpoint_writes_the_positions_it_gets_wrong(
    tiny_checkpoint: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The whole script on a tiny sft checkpoint: its JSON counts and ``--failed-out`` agree, and every line
    written is a solver demo of a position the checkpoint's greedy move is suboptimal in."""
    tree, _, checkpoint = tiny_checkpoint
    failed = tmp_path / "failed.jsonl"
    command = [sys.executable, str(SCRIPT), str(checkpoint), "--opponent", "mcts", "--demos", str(tree)]
    out = subprocess.run([*command, "--failed-out", str(failed)], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["positions"] == len(read_demos(tree)) == 545
    assert report["suboptimal"] > 0  # a barely trained tiny model errs somewhere
    lines = read_demos(failed)
    assert len(lines) == report["suboptimal"]  # one system text in this tree, so one line per failed position
    assert all(_optimal(record) for record in lines)


def test_a_walk_loses_in_a_seat_exactly_where_the_audit_finds_a_losing_move_there(
    tiny_checkpoint: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """``llm-gym demos --agent CHECKPOINT --all-replies`` reports each seat's worst game; ``ttt_audit.py --walk``
    rates the checkpoint's moves in that file. Best play draws and only the player's own moves can lower its value,
    so a seat's worst game is a loss exactly when one of the checkpoint's moves there turns a draw or win into a
    loss: two computations (the env's games, the audit's minimax) that must agree."""
    _, _, checkpoint = tiny_checkpoint
    walk = tmp_path / "walk.jsonl"
    command = [str(Path(sys.executable).parent / "llm-gym"), "demos", "--agent", str(checkpoint), "--env",
               "OpenSpiel-tic_tac_toe-v0", "--env-arg", "opponent=mcts", "--all-replies", "--out", str(walk), "--json"]  # fmt: skip
    report = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    records = read_demos(walk)
    assert report["decisions"] == len(records) and set(report["worst_return_by_seat"]) == {"0", "1"}
    for seat, mark in (("0", "x"), ("1", "o")):
        in_seat = [r for r in records if f"you are player {seat}" in r.messages[1]["content"]]
        assert in_seat and all(audit.parse(r.messages[-2]["content"])[1] == mark for r in in_seat)
        rating, _ = audit.rate(in_seat)
        assert (report["worst_return_by_seat"][seat] < 0) == (rating["suboptimal_to_a_loss"] > 0)
    fixes = tmp_path / "fixes.jsonl"
    command = [sys.executable, str(SCRIPT), "--walk", str(walk), "--failed-out", str(fixes)]
    rating = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert rating["positions"] == len(records) and rating["suboptimal"] >= rating["suboptimal_to_a_loss"]
    assert all(e["values"][str(e["move"])] < 0 for e in rating["losing_examples"])
    assert sum(seat["positions"] for seat in rating["by_seat"].values()) == len(records)
    for seat, mark in (("0", "x"), ("1", "o")):  # the per-seat counts say which seats the walk's games lose in
        assert (report["worst_return_by_seat"][seat] < 0) == (rating["by_seat"][mark]["suboptimal_to_a_loss"] > 0)
    # --failed-out: each suboptimal position of the walk once, answered by an optimal move, valued exactly
    walked = {r.messages[-2]["content"]: r for r in records}
    corrected = read_demos(fixes)
    assert len(corrected) == rating["suboptimal"] > 0 and all(_optimal(r) for r in corrected)
    for record in corrected:
        played = walked[record.messages[-2]["content"]]
        assert not _optimal(played) and record.messages[:-1] == played.messages[:-1]
        assert record.answer == record.choices[record.choice_values.index(max(record.choice_values))]
        assert record.return_to_go == max(record.choice_values) and record.source["agent"] == "minimax"
    refused = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert refused.returncode == 2 and "or --walk FILE" in refused.stderr


def test_focus_rounds_train_on_the_failures_and_the_walks_and_resume(
    tiny_checkpoint: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """scripts/ttt_focus_rounds.sh, one round on the tiny model with WALK=1: the round also walks its start
    checkpoint against every reply; its demos are the tree plus the audit's failures and the walk's corrected lines
    (each repeated REPEAT times, once here); it trains from the start checkpoint; the last checkpoint is audited
    and walked; and a second call finds everything done."""
    full, model, checkpoint = tiny_checkpoint
    tree = tmp_path / "tree.jsonl"  # the first 30 positions keep the round quick; the script takes any subset
    tree.write_text("".join(full.read_text().splitlines(keepends=True)[:30]))
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PYTHON": sys.executable, "LLM_GYM": str(bin_dir / "llm-gym"), "WALK": "1"}
    tiny = ["--set", f"model={model}", "--set", "dtype=float32", "--set", "threads=1", "--set", "trainable_layers=1"]
    tiny += ["--set", "max_demos=64"]  # the file is checked whole; training on its first 64 lines keeps the test quick
    command = ["bash", str(ROUNDS), str(checkpoint), str(tree), str(tmp_path / "out"), "1", "1", "--", *tiny]
    first = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    round_dir = tmp_path / "out" / "round_1"
    failed = read_demos(round_dir / "failed.jsonl")
    assert len(failed) == json.loads((round_dir / "audit.json").read_text())["suboptimal"] > 0
    walk_rating = json.loads((round_dir / "walk_audit.json").read_text())
    corrected = read_demos(round_dir / "walk_failed.jsonl")
    assert walk_rating["positions"] == len(read_demos(round_dir / "walk.jsonl"))
    assert len(corrected) == walk_rating["suboptimal"] > 0 and all(_optimal(r) for r in corrected)
    assert len(read_demos(round_dir / "demos.jsonl")) == 30 + len(failed) + len(corrected) > 64
    summary = json.loads((round_dir / "run" / "summary.json").read_text())
    assert summary["demo_decisions"]["train"] == 64
    assert json.loads((tmp_path / "out" / "final_audit.json").read_text())["positions"] == 30
    final = json.loads((tmp_path / "out" / "final_walk_audit.json").read_text())
    assert final["positions"] == len(read_demos(tmp_path / "out" / "final_walk.jsonl")) > 0
    for report in (round_dir / "walk.txt", tmp_path / "out" / "final_walk.txt"):  # the walk's worst game per seat
        assert "seat 0" in report.read_text() and "seat 1" in report.read_text()
    second = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert "last checkpoint" in first.stdout and second.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    assert "resuming" not in second.stdout + second.stderr  # the finished run was skipped, not retrained


def test_accumulated_focus_rounds_repeat_every_earlier_rounds_failures(
    tiny_checkpoint: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """With ACCUMULATE=1, round 2's demos are the tree plus its own failures and round 1's, each REPEAT times: a
    position fixed in round 1 is still trained on in round 2."""
    full, model, checkpoint = tiny_checkpoint
    tree = tmp_path / "tree.jsonl"
    tree.write_text("".join(full.read_text().splitlines(keepends=True)[:30]))
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PYTHON": sys.executable, "LLM_GYM": str(bin_dir / "llm-gym"), "ACCUMULATE": "1"}
    env.pop("WALK", None)
    tiny = ["--set", f"model={model}", "--set", "dtype=float32", "--set", "threads=1", "--set", "trainable_layers=1"]
    tiny += ["--set", "max_demos=32"]
    out = tmp_path / "out"
    command = ["bash", str(ROUNDS), str(checkpoint), str(tree), str(out), "2", "2", "--", *tiny]
    subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    failed = [len(read_demos(out / f"round_{k}" / "failed.jsonl")) for k in (1, 2)]
    assert failed[0] > 0
    assert len(read_demos(out / "round_1" / "demos.jsonl")) == 30 + 2 * failed[0]
    assert len(read_demos(out / "round_2" / "demos.jsonl")) == 30 + 2 * (failed[1] + failed[0])
