"""The reflection agent's parts on their own: the JSON answer format, the credit-assignment rule, verification by
replay on a hand-built OpenSpiel position, and the answer-only fine-tuning loss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.reflection.credit import choose_poor_steps, credit_reward, discounted_outcomes
from llm_gym.agents.reflection.prompts import (
    StepForReflection,
    format_reflection,
    parse_reflection,
    reflection_instructions,
    reflection_observation,
)
from llm_gym.agents.reflection.trial import Candidate
from llm_gym.agents.reflection.verify import RandomContinuation, verify
from llm_gym.lm.finetune import (
    IGNORE,
    Example,
    TrainSettings,
    answer_only_labels,
    collate,
    train_answers,
)

NAMES = ("NOOP", "FIRE", "UP", "DOWN")
IDS = (0, 1, 2, 3)

# -- the JSON answer format ------------------------------------------------------------------------------------


def test_a_well_formed_answer_parses() -> None:
    text = format_reflection("the paddle was too low", "UP", "the ball was above it")
    reflection = parse_reflection(text, NAMES, IDS)
    assert reflection is not None
    assert (reflection.action, reflection.action_name) == (2, "UP")
    assert reflection.analysis == "the paddle was too low" and reflection.reasoning == "the ball was above it"


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ('Sure! ```json\n{"analysis": "x", "action": "down", "reasoning": "y"}\n```', 3),  # fenced, lower case
        ('I think {"action": 1}', 1),  # an id
        ('{"analysis": "a", "action": "UP", "reasoning": "cut off', 2),  # broken JSON, the pair still reads
        ('{"note": 1} then {"action": "FIRE"}', 1),  # the first object with an action
    ],
)
def test_lenient_answers_parse(text: str, action: int) -> None:
    reflection = parse_reflection(text, NAMES, IDS)
    assert reflection is not None and reflection.action == action


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I would move up.",  # no JSON: a mention in prose is not a proposal
        '{"action": "JUMP"}',  # not a legal action
        '{"action": "move UP quickly"}',  # a sentence, not a name
        '{"action": true}',
        '{"analysis": "no action key"}',
        "{{{{",
    ],
)
def test_unparsable_answers_give_none(text: str) -> None:
    assert parse_reflection(text, NAMES, IDS) is None


def test_reflection_prompt_shows_before_after_and_the_format() -> None:
    step = StepForReflection("ball at 3", "ball at 4", "NOOP", NAMES, 0.0, -0.81, (0.0, -1.0))
    text = reflection_observation(step)
    assert isinstance(text, str)
    for part in ("ball at 3", "ball at 4", "Your move: NOOP", "+0, -1", "-0.810", "NOOP, FIRE, UP, DOWN"):
        assert part in text
    assert '"action"' in reflection_instructions("Play Pong.") and reflection_instructions("Play Pong.").startswith(
        "Play Pong."
    )
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    vision = reflection_observation(
        StepForReflection({"image": image, "text": "a"}, {"image": image + 1, "text": "b"}, "UP", NAMES, 0, -1, ())
    )
    assert isinstance(vision, dict) and len(vision["images"]) == 2 and int(vision["images"][1][0, 0, 0]) == 1


# -- credit assignment -----------------------------------------------------------------------------------------


def test_discounted_outcomes_charge_a_late_loss_to_the_moves_before_it() -> None:
    outcomes = discounted_outcomes([0, 0, 0, -1, 0, 1], gamma=0.5)
    # -1 + 0.5 * (0 + 0.5 * 1) = -0.75 at the lost point, halved for each step before it.
    np.testing.assert_allclose(outcomes, [-0.09375, -0.1875, -0.375, -0.75, 0.5, 1.0])
    # The step right before the lost point and the point itself are the poorest; nothing at or above 0 is chosen.
    assert choose_poor_steps(outcomes, rate=0.3) == [2, 3]
    assert choose_poor_steps(np.array([0.0, 1.0]), rate=1.0) == []
    assert choose_poor_steps(np.array([-1.0, -1.0, -1.0]), rate=0.1) == [0]  # at least one; ties to the earliest


def test_a_lost_life_counts_as_a_penalty() -> None:
    assert credit_reward(0.0, {"lives": 5}, {"lives": 4}, 1.0) == -1.0
    assert credit_reward(2.0, {"lives": 5}, {"lives": 5}, 1.0) == 2.0
    assert credit_reward(1.0, {}, {}, 1.0) == 1.0


# -- verification on a hand-built position -------------------------------------------------------------------------


def _scripted_o(observation: str, info: dict) -> int:
    """o takes the first free cell of 3, 4, 5, 6, ... (deterministic)."""
    legal = list(info["legal_actions"])
    return next(a for a in (3, 4, 5, 6, 7, 8, 0, 1, 2) if a in legal)


def test_verification_keeps_a_winning_correction_and_drops_a_losing_one() -> None:
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0", {"opponent": _scripted_o})
    game = env.make()
    game.reset(seed=0)
    game.step(0)  # x (0,0); o answers (1,0)
    obs, _, _, _, info = game.step(1)  # x (0,1); o answers (1,1): x wins with 2, and o wins with 5 unless x blocks
    assert sorted(info["legal_actions"]) == [2, 5, 6, 7, 8]
    snapshot = game.unwrapped.clone_state()

    def candidate(taken: int) -> Candidate:
        return Candidate(
            0, 2, 0, obs, obs, taken, "", "", tuple(info["legal_actions"]), (), info, 0.0, -1.0, (), snapshot
        )

    verdicts = verify(
        [(candidate(8), 2), (candidate(2), 8), (candidate(5), 2)],
        env,
        RandomContinuation(),
        horizon=3,
        keep_ties=True,
        batch=4,
        seed=0,
    )
    # 8 lets o complete its row (-1); 2 wins at once (+1): the correction is kept.
    assert (verdicts[0].taken_outcome, verdicts[0].proposed_outcome, verdicts[0].kept) == (-1.0, 1.0, True)
    # The other way round the "correction" loses a won game: dropped.
    assert (verdicts[1].taken_outcome, verdicts[1].proposed_outcome, verdicts[1].kept) == (1.0, -1.0, False)
    assert verdicts[2].kept and verdicts[2].proposed_outcome == 1.0
    # The snapshot was not disturbed by the replays: the position still plays out the same.
    game.unwrapped.restore_state(snapshot)
    assert game.step(2)[1] == 1.0
    game.close()


# -- answer-only loss --------------------------------------------------------------------------------------------


def test_labels_cover_the_answer_only_and_padding_is_ignored() -> None:
    short, long = answer_only_labels([5, 6], [7, 8]), answer_only_labels([5, 6, 9, 9], [7])
    assert short.labels == [IGNORE, IGNORE, 7, 8]
    tensors = collate([short, long], pad_id=0)
    assert tensors["input_ids"].tolist() == [[5, 6, 7, 8, 0], [5, 6, 9, 9, 7]]
    assert tensors["labels"].tolist() == [[IGNORE, IGNORE, 7, 8, IGNORE], [IGNORE] * 4 + [7]]
    assert tensors["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [1] * 5]


def test_answer_only_loss_falls_on_a_toy_set(tmp_path: Path) -> None:
    from llm_gym.agents.reflection.config import ReflectionConfig
    from llm_gym.agents.reflection.model import ReflectionModel
    from llm_gym.lm.testing import make_tiny_model

    # A wide initialisation: with the default 0.02 the tied output layer is too small for any peaked answer.
    model_dir = make_tiny_model(tmp_path / "m", layers=2, hidden=32, init_std=0.5)
    config = ReflectionConfig(model=str(model_dir), dtype="float32", threads=1, lora_rank=8, progress=False)
    model = ReflectionModel(config)
    examples = [
        model.encode(Example("Play Pong.", f"ball {i}, paddle {i + 3}", "UP" if i % 2 else "DOWN")) for i in range(8)
    ]
    # Only the answer and its end token are labelled; the prompt is not learnt.
    assert sum(label != IGNORE for label in examples[0].labels) == len("DOWN") + 1
    frozen = {n: p.clone() for n, p in model.model.named_parameters() if not p.requires_grad}
    losses = train_answers(
        model.model,
        examples,
        model.pad_id,
        TrainSettings(epochs=15, batch_size=4, learning_rate=1e-2, weight_decay=0, max_grad_norm=1.0, seed=0),
    )
    assert len(losses) == 30
    assert np.mean(losses[-4:]) < 0.5 * np.mean(losses[:4])
    # LoRA: the base weights did not move.
    assert all(torch.equal(p, frozen[n]) for n, p in model.model.named_parameters() if n in frozen)


def test_full_fine_tune_trains_every_language_weight_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    from llm_gym.agents.reflection.config import ReflectionConfig
    from llm_gym.agents.reflection.model import MODEL_DIR, ReflectionModel
    from llm_gym.lm.testing import make_tiny_model

    model_dir = make_tiny_model(tmp_path / "m", layers=1, hidden=32, init_std=0.5)
    config = ReflectionConfig(model=str(model_dir), finetune="full", dtype="float32", threads=1, progress=False)
    model = ReflectionModel(config)
    assert all(p.requires_grad for p in model.model.parameters())
    before = {n: p.detach().clone() for n, p in model.model.named_parameters()}
    examples = [model.encode(Example("Play Pong.", "ball 1", "UP"))]
    train_answers(
        model.model,
        examples,
        model.pad_id,
        TrainSettings(epochs=2, batch_size=1, learning_rate=1e-3, weight_decay=0, max_grad_norm=1.0, seed=0),
    )
    assert not torch.equal(before["model.layers.0.mlp.up_proj.weight"], model.model.model.layers[0].mlp.up_proj.weight)
    checkpoint = tmp_path / "step_1"
    model.save(checkpoint)
    assert (checkpoint / MODEL_DIR / "config.json").is_file()
    resumed = ReflectionModel(config, checkpoint)
    for (name, a), b in zip(model.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b), name


# -- multi-turn history (history=K) ----------------------------------------------------------------------------------


class _RecordingContinuation(RandomContinuation):
    """Random continuation that keeps the turns each branch's first continuation step was shown."""

    def __init__(self) -> None:
        super().__init__()
        self.first_turns: dict[int, tuple] = {}

    def act_branches(self, branches, observations, infos):  # type: ignore[no-untyped-def]
        for b, info in zip(branches, infos, strict=True):
            self.first_turns.setdefault(b, tuple(info["turns"]))
        return super().act_branches(branches, observations, infos)


def test_replays_continue_with_the_turns_the_episode_had_at_the_snapshot() -> None:
    from llm_gym.lm.prompts import observation_text

    env = EnvConfig("OpenSpiel-tic_tac_toe-v0", {"opponent": _scripted_o, "history": 2})
    game = env.make()
    first, _ = game.reset(seed=0)
    obs, _, _, _, info = game.step(0)  # x (0,0); o answers (1,0)
    assert len(info["turns"]) == 1 and info["turns"][0][0] == observation_text(first)
    candidate = Candidate(
        0,
        1,
        0,
        obs,
        obs,
        1,
        "",
        "",
        tuple(info["legal_actions"]),
        (),
        info,
        0.0,
        -1.0,
        (),
        game.unwrapped.clone_state(),
    )
    continuation = _RecordingContinuation()
    verify([(candidate, 2)], env, continuation, horizon=2, keep_ties=True, batch=2, seed=0)
    names = dict(zip(info["legal_actions"], info["action_names"], strict=True))
    # Each branch's next prompt shows the episode's turns: the one before the snapshot, then the replayed move from
    # the snapshot's observation (not a fresh episode's reset board, which the reset before the restore left).
    for branch, action in ((0, 1), (1, 2)):
        assert continuation.first_turns[branch] == (info["turns"][0], (observation_text(obs), names[action]))
    game.close()


def test_fine_tuning_examples_carry_the_earlier_turns_the_policy_saw(tmp_path: Path) -> None:
    from llm_gym.agents.reflection.config import ReflectionConfig
    from llm_gym.agents.reflection.model import ReflectionModel
    from llm_gym.lm.testing import make_tiny_model

    config = ReflectionConfig(model=str(make_tiny_model(tmp_path / "m", layers=1, hidden=32)), threads=1)
    model = ReflectionModel(config)
    turns = (("ball at 3, paddle at 9", "LEFT"),)
    with_turns = model.encode(Example("Play Pong.", "ball at 4, paddle at 8", "UP", turns))
    without = model.encode(Example("Play Pong.", "ball at 4, paddle at 8", "UP"))
    text = model.tokenizer.decode(with_turns.input_ids)
    assert "ball at 3, paddle at 9" in text and text.index("LEFT") < text.index("ball at 4, paddle at 8")
    assert len(with_turns.input_ids) > len(without.input_ids)
    answer = [t for t, label in zip(with_turns.input_ids, with_turns.labels, strict=True) if label != IGNORE]
    assert answer == [t for t, label in zip(without.input_ids, without.labels, strict=True) if label != IGNORE]
