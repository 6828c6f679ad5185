"""Audit a tic-tac-toe checkpoint on every position the exact solver can face: its greedy move against minimax.

Plays nothing: for each decision of ``llm-gym demos --agent solver --all-replies`` (written here unless ``--demos``
names such a file), it asks the checkpoint's policy for its greedy move and rates that move and every legal one by
exact game value (win 1, draw 0, loss -1 with best play after it). Prints JSON: positions, how many moves agree
with the solver, how many have a lower value than the best (suboptimal), and how many turn a won or drawn
position into a lost one, with a few examples. The move values are computed here from the board, independently
of the solver that wrote the demos.

``--walk FILE`` rates a file that ``llm-gym demos --agent CHECKPOINT --all-replies`` wrote instead: the
checkpoint's own moves in every position its play can reach against any reply (no model is run here). A move
there that turns a won or drawn position into a lost one is a line an opponent can beat the checkpoint with; the
walk's report says in which seat (its worst game per seat). With ``--failed-out`` there, each of the walk's
suboptimal positions is written as a corrected line: the lowest-id optimal move as the answer, every legal move's
exact value as ``choice_values`` (so ``sft --set choice_target=best`` trains towards every optimal move) and that
value with best play as the line's return. These are positions the solver's own tree never reaches (they follow
the checkpoint's mistakes), so an audit of the tree alone cannot find them.

``--failed-out FILE`` appends the solver's demo lines of every suboptimal position to FILE, under each system text
the demos file holds for that board (the texts differ in the opponent's description only), so a further SFT round
can weight the positions the checkpoint still gets wrong (docs/sft_tic_tac_toe.md shows the loop).

    python scripts/ttt_audit.py runs/RUN/checkpoints/step_N [--opponent mcts] [--demos tree.jsonl] [--failed-out F]
    python scripts/ttt_audit.py --walk walk.jsonl [--failed-out F]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import tempfile
from pathlib import Path

from llm_gym.agent import EnvConfig, load_policy
from llm_gym.demos import DemoRecord, read_demos, write_records
from llm_gym.demos.tree import record_demo_tree
from llm_gym.plugins import get_agent

ENV_ID = "OpenSpiel-tic_tac_toe-v0"
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def winner(board: str) -> str | None:
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@functools.cache
def value(board: str, me: str, to_move: str) -> int:
    """Exact value of ``board`` for ``me`` with ``to_move`` to play (both sides play perfectly from here)."""
    won = winner(board)
    if won:
        return 1 if won == me else -1
    if "." not in board:
        return 0
    other = "o" if to_move == "x" else "x"
    values = [value(board[:i] + to_move + board[i + 1 :], me, other) for i, cell in enumerate(board) if cell == "."]
    return max(values) if to_move == me else min(values)


def parse(observation: str) -> tuple[str, str, list[int], list[str]]:
    """(board as 9 chars, my mark, legal ids, legal names) from the env's observation text."""
    lines = observation.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("State"))
    board = "".join(lines[start + 1 : start + 4])
    me = "x" if "(x)" in lines[0] else "o"
    pairs = [line.split(" -> ", 1) for line in lines if " -> " in line and line.split(" -> ", 1)[0].isdigit()]
    return board, me, [int(a) for a, _ in pairs], [n for _, n in pairs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, nargs="?")
    parser.add_argument("--opponent", default="random", choices=("random", "mcts"), help="system text to use")
    parser.add_argument("--demos", type=Path, help="a --all-replies solver file (default: written now)")
    parser.add_argument("--failed-out", type=Path, help="append corrected demo lines of suboptimal positions here")
    parser.add_argument("--walk", type=Path, help="rate the moves of a checkpoint's --all-replies file instead")
    args = parser.parse_args()
    if (args.walk is None) == (args.checkpoint is None):
        parser.error("give a checkpoint to audit, or --walk FILE (a checkpoint's --all-replies demos), not both")
    if args.walk is not None:
        walked = read_demos(args.walk)
        rating, failed = rate(walked)
        if args.failed_out is not None:
            walked_by = walked[0].source.get("checkpoint") if walked else None  # provenance: whose mistakes
            source = {"agent": "minimax", "script": "scripts/ttt_audit.py --walk", "walk": str(args.walk),
                      "walked_checkpoint": walked_by}  # fmt: skip
            fixes = [corrected(r, source) for r in walked if r.messages[-2]["content"] in failed]
            write_records(args.failed_out, fixes)
        print(json.dumps({"walk": str(args.walk), **rating}, indent=1))
        return
    env = EnvConfig(ENV_ID, {"opponent": args.opponent})
    demos = args.demos
    if demos is None:
        demos = Path(tempfile.mkdtemp()) / "tree.jsonl"
        record_demo_tree(get_agent("solver")().policy(env), env, demos, source={"agent": "solver"})
    every_text = read_demos(demos)
    records = [r for r in every_text if ("MCTS" in r.messages[0]["content"]) == (args.opponent == "mcts")]
    policy, _ = load_policy(args.checkpoint, env)
    parsed = [parse(r.messages[-2]["content"]) for r in records]
    observations = [r.messages[-2]["content"] for r in records]
    infos = [{"legal_actions": legal, "action_names": names} for _, _, legal, names in parsed]
    chosen: list[int] = []
    for start in range(0, len(records), 16):
        chosen += [int(a) for a in policy.act(observations[start : start + 16], infos[start : start + 16])]
    rating, failed = rate(records, chosen)
    if args.failed_out is not None:
        write_records(args.failed_out, [r for r in every_text if r.messages[-2]["content"] in failed])
    print(json.dumps({
        "checkpoint": str(args.checkpoint), "opponent_text": args.opponent,
        "agrees_with_solver": sum(m == r.action for m, r in zip(chosen, records, strict=True)), **rating,
    }, indent=1))  # fmt: skip


def move_values(board: str, me: str, legal: list[int]) -> dict[int, int]:
    """The exact value, for ``me`` (to move), of each legal move on ``board``."""
    other = "o" if me == "x" else "x"
    return {a: value(board[:a] + me + board[a + 1 :], me, other) for a in legal}


def corrected(record: DemoRecord, source: dict) -> DemoRecord:
    """``record`` answered by exact minimax: the lowest-id optimal move, each choice's exact value, and the value of
    the position with best play as its return (the reward fields of the walk's own move no longer apply)."""
    board, me, legal, names = parse(record.messages[-2]["content"])
    values = move_values(board, me, legal)
    best = max(values.values())
    move = min(a for a in legal if values[a] == best)
    by_name = {name: values[a] for a, name in zip(legal, names, strict=True)}
    answer = {"role": "assistant", "content": names[legal.index(move)]}
    return dataclasses.replace(
        record, messages=(*record.messages[:-1], answer), action=move, reward=0.0, return_to_go=float(best),
        episode_return=float(best), episode_score=float(best), source=source,
        choice_values=tuple(float(by_name[c]) for c in record.choices) if record.choices else (),
    )  # fmt: skip


def rate(records: list, chosen: list[int] | None = None) -> tuple[dict, set[str]]:
    """Rate ``chosen`` (default: each record's own answer, as in a walk) by exact game value: ({positions, suboptimal,
    suboptimal_to_a_loss, by_seat (the three counts per seat), examples, losing_examples}, the observations of the
    suboptimal positions). With ``chosen``, an example also names the record's answer as ``solver`` (the records
    are the solver's tree)."""
    moves = chosen if chosen is not None else [int(r.action) for r in records]
    suboptimal, losing, failed = [], [], set()
    seats: list[str] = []
    for record, move in zip(records, moves, strict=True):
        board, me, legal, _ = parse(record.messages[-2]["content"])
        seats.append(me)
        values = move_values(board, me, legal)
        best = max(values.values())
        if values[move] < best:
            example = {"board": board, "me": me, "move": move, "values": values}
            if chosen is not None:
                example["solver"] = record.action
            suboptimal.append(example)
            if values[move] < 0 <= best:
                losing.append(example)
            failed.add(record.messages[-2]["content"])
    rating = {"positions": len(records), "suboptimal": len(suboptimal), "suboptimal_to_a_loss": len(losing)}
    # Per seat (x moves first): in a walk, a seat with a move to a loss has lost its worst game (the position is
    # reachable and the opponent plays best from there); a seat without one draws at worst.
    rating["by_seat"] = {
        seat: {"positions": seats.count(seat), "suboptimal": sum(e["me"] == seat for e in suboptimal),
               "suboptimal_to_a_loss": sum(e["me"] == seat for e in losing)}
        for seat in ("x", "o")
    }  # fmt: skip
    return {**rating, "examples": suboptimal[:5], "losing_examples": losing[:5]}, failed


if __name__ == "__main__":
    main()
