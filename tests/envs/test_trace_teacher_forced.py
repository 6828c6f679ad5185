"""The typed parts of a worked solution and ``scripts/trace_teacher_forced.py``: every character of a worked answer
gets the kind of the part it is in, and on a tiny trained checkpoint the per-kind losses add up to the answer loss
that ``sft`` trains on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from typer.testing import CliRunner

import llm_gym  # noqa: F401 - registers the env ids
from llm_gym.agent import EnvConfig, load_policy
from llm_gym.agents.sft import SFTAgent
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder, load_records
from llm_gym.cli import build_app
from llm_gym.config import to_dict
from llm_gym.envs.trace.worked import PART_KINDS, worked_answer, worked_solution
from llm_gym.lm.finetune import answer_loss, collate
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.testing import make_tiny_model
from llm_gym.runs import Run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "trace_teacher_forced.py"


def _script():
    if "trace_teacher_forced" not in sys.modules:  # its dataclass needs the module registered
        spec = importlib.util.spec_from_file_location("trace_teacher_forced", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["trace_teacher_forced"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["trace_teacher_forced"]


def test_each_step_is_its_typed_parts() -> None:
    program = 'y = 4\nname = "cherry"\ny += y\nprint(f"{name} -> {y}")\nprint(9 + 2)\n'
    parts = worked_solution(program).parts
    assert parts == (
        (("statement", "y = 4"),),
        (("statement", 'name = "cherry"'),),
        (("statement", "y = y + y"), ("substitution", " = 4 + 4"), ("operation", " = 8")),
        (("statement", 'print(f"{name} -> {y}")'), ("substitution", " = print(f\"{'cherry'} -> {8}\")"),
         ("operation", " = print('cherry -> 8')"), ("printed", " -> cherry -> 8")),
        (("statement", "print(9 + 2)"), ("operation", " = print(11)"), ("printed", " -> 11")),
    )  # fmt: skip
    assert {kind for step in parts for kind, _ in step} <= set(PART_KINDS)


def test_every_character_of_a_worked_answer_has_its_part() -> None:
    env = gym.make("Trace-v0", level=1)
    env.reset(options={"task_id": 3})
    task = env.unwrapped.task
    env.close()
    answer = worked_answer(task.program, task.expected)
    kinds, starts = _script().char_kinds(answer, task.program)
    assert len(kinds) == len(answer)
    steps = worked_solution(task.program).steps
    assert len(starts) == len(steps)
    block_end = answer.index("</think>\n") + len("</think>\n")
    assert kinds[:8] == ["markup"] * 8 and kinds[block_end - 9 : block_end] == ["markup"] * 9
    for start, step in zip(sorted(starts), steps, strict=True):
        assert answer[start : start + len(step)] == step and kinds[start + len(step)] == "newline"
    assert {k for k in kinds[block_end:] if k != "newline"} <= {"output debug", "output plain"}
    # a bare answer, or a block that is not the program's solution, is read as stdout lines
    bare, _ = _script().char_kinds(task.expected, task.program)
    assert set(bare) <= {"output debug", "output plain", "newline"}
    other, starts = _script().char_kinds(answer.replace(steps[0], steps[0] + " "), task.program)
    assert not starts and "statement" not in other


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny model's sft checkpoint on two bare level-1 demos, and the demos."""
    root = tmp_path_factory.mktemp("teacher-forced")
    model = make_tiny_model(root / "lm", layers=1, hidden=32, init_std=0.1)
    demos = root / "demos.jsonl"
    result = CliRunner().invoke(build_app(), ["demos", "--env", "Trace-v0", "--env-arg", "level=1", "--episodes", "2",
                                              "--seed", "4", "--out", str(demos)])  # fmt: skip
    assert result.exit_code == 0, result.output
    config = SFTConfig(model=str(model), demos=str(demos), dtype="float32", threads=1, trainable_layers=1,
                       progress=False, eval_episodes=0, eval_at_start=False, action_mode="generate", epochs=1,
                       batch_size=2, validation_fraction=0.0, value_coef=0.0)  # fmt: skip
    run = Run.create("Trace-v0", "sft", to_dict(config), path=root / "run")
    try:
        SFTAgent(config).train(EnvConfig("Trace-v0", {"level": 1}), run)
    finally:
        run.close()
    return root / "run", demos


def test_the_kinds_add_up_to_the_answer_loss_sft_trains_on(trained: tuple[Path, Path]) -> None:
    run, demos = trained
    result = _script().analyse(str(run), demos, limit=2)
    kinds = result["kinds"]
    assert result["answers"] == 2 and set(kinds) <= {"all", "output debug", "output plain", "newline", "end"}
    parts = [row for kind, row in kinds.items() if kind != "all"]
    assert sum(row["tokens"] for row in parts) == kinds["all"]["tokens"]
    assert kinds["end"]["tokens"] == 2
    for row in kinds.values():
        assert 0.0 <= row["top1_accuracy"] <= 1.0 and row["loss_per_token"] > 0
    # the same answer tokens, the same loss, as the training loss on the played (merged) model
    policy, _ = load_policy(run, EnvConfig("Trace-v0", {"level": 1}))
    model, tokenizer = policy.backend.model, policy.backend.tokenizer
    encoder = DemoEncoder(PromptBuilder(tokenizer, ""), with_end=True)
    examples = [encoder.encode(r).encoded for r in load_records(str(demos), "Trace-v0")]
    with torch.no_grad():
        losses = [float(answer_loss(model, collate([e], tokenizer.pad_token_id))) for e in examples]
    tokens = [detail["tokens"] for detail in result["answers_detail"]]
    expected = sum(loss * n for loss, n in zip(losses, tokens, strict=True)) / sum(tokens)
    assert kinds["all"]["loss_per_token"] == pytest.approx(expected, abs=1e-3)
