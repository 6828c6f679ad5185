"""sft on tiny random models: demos become answer-only examples (label -100 on every prompt token), the packed loss
equals the shared answer loss, training raises the demo answers' probability, the checkpoint is ppo_lora's layout
and loads with plain peft, ``llm-gym play`` plays it, and ppo_lora continues from it with the same log-probs and
value at its first step. Free-text answers (generate mode) are learnt too. Bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sft_demos import sft_settings, write_demos  # tests/agents/sft_demos.py (pytest puts this folder on sys.path)
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.agents.ppo_lora.testing import train as train_ppo
from llm_gym.agents.ppo_lora.train import initial_actor_critic
from llm_gym.agents.sft import SFTAgent
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder, load_records, split_episodes
from llm_gym.cli import build_app
from llm_gym.config import to_dict
from llm_gym.demos.format import read_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.testing import register_one_answer_env
from llm_gym.errors import ConfigError
from llm_gym.lm.finetune import IGNORE, answer_loss, collate
from llm_gym.lm.runtime import quiet_peft
from llm_gym.plugins import get_agent
from llm_gym.runs import Run
from llm_gym.training.checkpoints import load_policy

TTT = "OpenSpiel-tic_tac_toe-v0"
ANSWER = "42"
register_one_answer_env(
    "TestSFTAnswer-v0", lambda answer: float(answer.strip() == ANSWER), prompt="The answer?", instructions="Answer."
)


@pytest.fixture(scope="module")
def ttt_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = EnvConfig(TTT)
    solver = get_agent("solver")()
    return write_demos(tmp_path_factory.mktemp("demos") / "ttt.jsonl", env, solver.policy(env), episodes=12)


def _train(path: Path, env_id: str, config: SFTConfig) -> tuple[dict, Run]:
    run = Run.create(env_id, "sft", to_dict(config), path=path)
    try:
        return SFTAgent(config).train(EnvConfig(env_id), run), run
    finally:
        run.close()


def _actor_critic(config: SFTConfig, env_id: str) -> ActorCritic:
    return ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(env_id)).instructions)


def test_demo_examples_label_only_the_answer(tiny_model_dir: Path, ttt_demos: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos)
    ac = _actor_critic(config, TTT)
    records = read_demos(ttt_demos)
    encoder = DemoEncoder(ac.builder, with_end=True)
    for record in records[:6]:
        example = encoder.encode(record).encoded
        user, answer = record.messages[1]["content"], record.messages[2]["content"]
        prompt = ac.builder.encode([user])[0].ids  # exactly what the policy is shown when it acts
        answer_ids = ac.builder.choice_ids(answer, True)  # exactly what score mode rates
        assert example.input_ids == prompt + answer_ids
        assert example.labels[: len(prompt)] == [IGNORE] * len(prompt)
        assert example.labels[len(prompt) :] == answer_ids
        assert encoder.encode(record).uses_prefix


def test_packed_loss_is_the_shared_answer_loss(tiny_model_dir: Path, ttt_demos: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, value_coef=0.0)
    ac = _actor_critic(config, TTT)
    examples = [DemoEncoder(ac.builder, True).encode(r) for r in read_demos(ttt_demos)[:5]]
    data = Batches(ac, examples, batch_size=2)
    with torch.no_grad():
        packed = data.losses(ac, range(5), config, train=True)["answer_loss"]
        reference = answer_loss(ac.model, collate([e.encoded for e in examples], ac.pad_id))
    assert float(packed) == pytest.approx(float(reference), rel=1e-4)


def test_episodes_never_straddle_the_split(ttt_demos: Path) -> None:
    records = read_demos(ttt_demos)
    train, held = split_episodes(records, 0.25, seed=0)
    assert held and train and len(train) + len(held) == len(records)
    assert not {r.episode for r in train} & {r.episode for r in held}
    assert split_episodes(records, 0.25, seed=0) == (train, held)


def test_sft_learns_the_demos_and_ppo_continues_from_it(tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, epochs=4, eval_episodes=2, eval_max_steps=3)
    summary, run = _train(tmp_path / "sft", TTT, config)
    scalars = _scalars(run)
    assert scalars["val/answer_loss"][-1] < scalars["val/answer_loss"][0]
    assert summary["demo_decisions"]["validation"] > 0 and len(summary["evaluations"]) == 5
    checkpoint = Path(summary["checkpoint"])
    assert (checkpoint / "adapter" / "adapter_config.json").is_file() and (checkpoint / "value_head.pt").is_file()
    assert Path(summary["plot"]).is_file()

    # ppo_lora warm-started from it: at step 0 the same policy (log-probs) and value as the saved checkpoint,
    # read back with plain peft.
    ppo = tiny_config(tiny_model_dir, init_adapter=str(checkpoint), lora_rank=config.lora_rank)
    instructions = EnvTraits.probe(EnvConfig(TTT)).instructions
    warm = initial_actor_critic(ppo, instructions, resume=None)
    fresh = initial_actor_critic(tiny_config(tiny_model_dir), instructions, resume=None)
    observation, info = EnvConfig(TTT).make().reset(seed=0)
    decided = {
        name: act(ac, strategy_for(ppo), [observation], [info], TTT, generator=torch.Generator(), greedy=True)
        for name, ac in (("warm", warm), ("fresh", fresh))
    }
    choices_logp = _plain_peft_choice_logprobs(tiny_model_dir, checkpoint / "adapter", instructions, observation, info)
    chosen = int(decided["warm"].choice[0])
    assert float(decided["warm"].logprob[0]) == pytest.approx(float(choices_logp[chosen]), abs=1e-4)
    assert float(decided["fresh"].logprob[0]) != pytest.approx(float(decided["warm"].logprob[0]), abs=1e-4)
    head = torch.load(checkpoint / "value_head.pt", weights_only=True)
    assert torch.equal(warm.value_head.weight, head["weight"])

    # ...and trains: one PPO update from the warm start.
    ppo_summary, _ = train_ppo(tmp_path / "ppo", TTT, tiny_config(
        tiny_model_dir, init_adapter=str(run.path), total_steps=8, num_envs=2, num_steps=4, minibatch_size=4,
        checkpoint_every=8,
    ))  # fmt: skip
    assert ppo_summary["updates"] == 1

    # A mismatched adapter shape is one clear line.
    with pytest.raises(ConfigError, match="trainable_layers=1"):
        initial_actor_critic(tiny_config(tiny_model_dir, init_adapter=str(checkpoint), trainable_layers=2), "x", None)

    # `llm-gym play --checkpoint` plays it like a ppo_lora checkpoint.
    result = CliRunner().invoke(build_app(), ["play", "--checkpoint", str(checkpoint), "-n", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["episodes"]) == 2


def test_free_text_answers_are_learnt(tiny_model_dir: Path, tmp_path: Path) -> None:
    env = EnvConfig("TestSFTAnswer-v0")

    class Oracle:
        def act(self, observations, infos):
            return [ANSWER] * len(observations)

    demos = write_demos(tmp_path / "answers.jsonl", env, Oracle(), episodes=8)
    config = sft_settings(
        tiny_model_dir, demos, action_mode="generate", max_new_tokens=4, epochs=30, eval_episodes=2,
        learning_rate=1e-2, value_coef=0.0,
    )  # fmt: skip
    summary, _ = _train(tmp_path / "run", "TestSFTAnswer-v0", config)
    assert summary["evaluations"][0]["scores"] == [0.0, 0.0]
    policy, _ = load_policy(Path(summary["checkpoint"]))
    assert [a.strip() for a in policy.act(["The answer?"], [{}])] == [ANSWER]


def test_the_evaluation_before_training_can_be_skipped(tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, epochs=1, eval_episodes=2, eval_max_steps=3, eval_at_start=False)
    summary, _ = _train(tmp_path / "run", TTT, config)
    assert [e["epoch"] for e in summary["evaluations"]] == [1]  # only the end: no evaluation of the untrained model


def test_bad_demos_are_one_line(tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--set demos="):
        load_records("", TTT)
    with pytest.raises(ConfigError, match="does not exist"):
        load_records(str(tmp_path / "missing.jsonl"), TTT)
    with pytest.raises(ConfigError, match="is a folder; give the JSONL file in it"):
        load_records(str(tmp_path), TTT)
    with pytest.raises(ConfigError, match="this run trains on OpenSpiel-connect_four-v0"):
        load_records(str(ttt_demos), "OpenSpiel-connect_four-v0")
    result = CliRunner().invoke(build_app(), ["train", "--agent", "sft", "--env", TTT, "--runs-root", str(tmp_path)])
    assert result.exit_code == 2 and result.output.strip().splitlines()[-1].startswith("error: sft needs demos")
    assert not list(tmp_path.iterdir())  # the refused run left no directory behind


def _plain_peft_choice_logprobs(model_dir, adapter, instructions, observation, info) -> torch.Tensor:
    """log pi(action) over the legal actions, from a plain peft model and full forward passes."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_gym.lm.prompts import PromptBuilder

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with quiet_peft():
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), str(adapter)).eval()
    builder = PromptBuilder(tokenizer, instructions)
    prompt = builder.encode([observation])[0].ids
    scores = []
    with torch.no_grad():
        for name in info["action_names"]:
            answer = builder.choice_ids(name, True)
            logits = model(torch.tensor([prompt + answer])).logits[0].float()
            logp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
            scores.append(logp[torch.arange(len(answer)), torch.tensor(answer)].sum())
    return torch.log_softmax(torch.stack(scores), 0)


def _scalars(run: Run) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run.path / "tb"))
    accumulator.Reload()
    return {tag: [e.value for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}
