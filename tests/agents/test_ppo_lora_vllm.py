"""``ppo_lora --set rollout_backend=vllm`` against a real vLLM engine on the CPU (the default model, float32): after
every update the engine serves the new adapter, and its action log-probs then match the training model's within
ENGINE_TOLERANCE (before the sync they do not); whole runs in score and generate mode log that gap for every
rollout; an engine that dies mid-rollout (in the middle of a request) ends the run with one line and a checkpoint that
``--resume`` continues.

The session's one engine (the ``vllm_backend`` fixture in tests/conftest.py) serves every test but the dead-engine
one, which starts its own (eager, so no compile) and kills it. ``make test`` runs these in .venv-vllm.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, rules_of, strategy_for, turns_of
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.engine import EngineStoppedError, RolloutEngine
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import RolloutActor, collect, engine_gap
from llm_gym.agents.ppo_lora.testing import tiny_settings
from llm_gym.agents.ppo_lora.train import train
from llm_gym.agents.ppo_lora.update import ppo_update
from llm_gym.callbacks import Callback
from llm_gym.config import to_dict
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.backends import ScoreRequest
from llm_gym.lm.scoring import categorical_logprobs
from llm_gym.rl import compute_gae
from llm_gym.runs import Run
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.loop import load_envs

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

ENV = EnvConfig("LLMBreakout-text-v0", {"history": 2})
"""Breakout with two earlier turns in every prompt: the engine must build the same multi-turn prompts."""

ENGINE_TOLERANCE = 2e-3
"""Largest gap allowed between the engine's and the training model's log-probability of one action under the
categorical over the legal actions (nats): float32 in both, but vLLM's LoRA kernels against peft's layers and
attention kernels that sum in other orders. The backends' parity test allows the same per action likelihood;
measured here: at most 8e-5."""

GENERATE_TOLERANCE = 5e-3
"""The same for a sampled answer of up to 4 tokens (its log-prob sums one gap per token); measured: at most 5e-5."""


def _settings(**overrides) -> dict:
    rollout = dict(num_envs=3, num_steps=2, minibatch_size=6, kl_coef=0.0, rollout_backend="vllm")
    return tiny_settings(None, **{"trainable_layers": 2, "lora_rank": 16, **rollout, **overrides})


@pytest.fixture(scope="module")
def engine(vllm_backend):
    rollout_engine = RolloutEngine(vllm_backend, owned=False)
    yield rollout_engine
    rollout_engine.close()


def _policies(engine: RolloutEngine, ac: ActorCritic, stepper: EnvStepper) -> tuple[np.ndarray, np.ndarray]:
    """Log-probs of every legal action in every env's current state: (engine, training model), padded with 0."""
    infos, observations = stepper.infos, list(stepper.observations)
    rules, turns = rules_of(ac, infos), turns_of(infos)
    legal = [legal_choices(info, ENV.env_id)[1] for info in infos]
    requests = [ScoreRequest(r, o, tuple(n), t) for r, o, n, t in zip(rules, observations, legal, turns, strict=True)]
    served = [s - np.logaddexp.reduce(s) for s in engine.score(requests)]
    prompts = ac.encode(observations, rules, turns)
    batch = ac.pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], [ac.choices(n) for n in legal])
    with torch.no_grad():
        out, _ = ac.top(ac.bottom(batch), batch, "rollout")
    trained = categorical_logprobs(out.seq_logprobs, batch.seq_row, len(prompts)).double().numpy()
    width = max(len(n) for n in legal)
    a, b = np.zeros((len(legal), width)), np.zeros((len(legal), width))
    for i, s in enumerate(served):
        a[i, : len(s)], b[i, : len(s)] = s, trained[i, : len(s)]
    return a, b


@pytest.mark.timeout(1800)  # the first test to use the session's engine pays for its start when run alone
def test_after_each_sync_the_engine_acts_with_the_trainers_policy(engine: RolloutEngine) -> None:
    """One rollout through the engine, one PPO update with a large step: before the sync the engine's policy is the
    old one (far from the trainer's), after it the two agree within ENGINE_TOLERANCE on every legal action."""
    config = PPOLoRAConfig(**_settings(learning_rate=1e-2, update_epochs=4))
    traits = EnvTraits.probe(ENV)
    torch.manual_seed(0)
    ac = ActorCritic(config, traits.instructions)
    strategy = strategy_for(config)
    stepper = EnvStepper(make_vector_env(ENV, config.num_envs, text_actions=False), seed=0)
    stepper.reset()
    generator = torch.Generator().manual_seed(0)
    engine.sync(ac)

    rollout = collect(RolloutActor(ac, strategy, generator, engine=engine), stepper, config, ENV.env_id, torch.zeros(3))
    gap = engine_gap(rollout)
    assert gap["charts/engine_logprob_gap_max"] < ENGINE_TOLERANCE, gap
    assert any(d.prompts[0] != rollout.decisions[0].prompts[0] for d in rollout.decisions[1:])
    assert all(len(info["turns"]) == 2 for info in stepper.infos), "the prompts carry two earlier turns"

    arrays = rollout.stacked()
    advantages, returns = compute_gae(
        arrays["rewards"], arrays["values"], arrays["dones"], rollout.last_value, rollout.last_done, 0.99, 0.95,
        arrays["truncated_values"],
    )  # fmt: skip
    # A reward signal that does not depend on the game (which pays nothing in three steps): favour FIRE.
    fire = torch.tensor([[float(a == 1) for a in d.actions] for d in rollout.decisions])
    advantages = advantages + fire - fire.mean()
    optimizer = torch.optim.AdamW(ac.trainable_parameters(), lr=config.learning_rate)
    ppo_update(ac, strategy, optimizer, rollout, advantages, returns, config, generator, 0.0)

    stale, trained = _policies(engine, ac, stepper)
    assert np.abs(stale - trained).max() > 10 * ENGINE_TOLERANCE, "the update did not move the policy"
    version = engine.sync(ac)
    served, trained = _policies(engine, ac, stepper)
    print(
        f"adapter v{version}: stale gap {np.abs(stale - trained).max():.4f}, synced {np.abs(served - trained).max():.5f}"
    )
    np.testing.assert_allclose(served, trained, atol=ENGINE_TOLERANCE, rtol=0)

    # The next rollout's decisions: the engine picks, the trainer's log-probs stay within the tolerance.
    decisions = act(ac, strategy, stepper.observations, stepper.infos, ENV.env_id, generator=generator, engine=engine)
    assert (decisions.engine_logprob - decisions.logprob).abs().max() < ENGINE_TOLERANCE
    stepper.close()


class Gaps(Callback):
    """Records every update's engine gap and the engine's adapter version when the update's metrics arrive."""

    def __init__(self, engine: RolloutEngine) -> None:
        self.engine, self.updates = engine, []

    def on_update(self, step: int, metrics) -> None:
        self.updates.append((step, self.engine.version, metrics.get("charts/engine_logprob_gap_max")))


@pytest.mark.parametrize(
    ("mode", "tolerance"), [("score", ENGINE_TOLERANCE), ("generate", GENERATE_TOLERANCE)], ids=["score", "generate"]
)
def test_a_run_rolls_out_through_the_engine(engine: RolloutEngine, tmp_path: Path, mode: str, tolerance: float) -> None:
    """Two updates: each rollout's actions came from the engine serving the latest adapter (a new version per
    update; the gap to the trainer's log-probs within the tolerance in every rollout), and a checkpoint."""
    config = PPOLoRAConfig(
        **_settings(action_mode=mode, max_new_tokens=4, total_steps=12, learning_rate=2e-3, checkpoint_every=12)
    )
    run = Run.create(ENV.env_id, "ppo_lora", to_dict(config), path=tmp_path / "run")
    gaps = Gaps(engine)
    first = engine.version
    summary = train(config, ENV, run, [gaps], agent="ppo_lora", rollout_engine=engine)
    run.close()
    assert summary["env_steps"] == 12
    # One new adapter version per update (the first at the start), handed over before on_update fires, so
    # before the next rollout.
    assert [version - first for _, version, _ in gaps.updates] == [2, 3]
    assert all(gap is not None and gap < tolerance for _, _, gap in gaps.updates), gaps.updates
    print(mode, "engine log-prob gap per rollout:", [round(g, 5) for _, _, g in gaps.updates])
    assert (tmp_path / "run" / "checkpoints" / "step_12" / "adapter" / "adapter_config.json").is_file()


class KillTheEngineMidRollout(RolloutEngine):
    """A real engine whose process is SIGKILLed while its ``at``-th score call (inside the second rollout) is with
    the engine, after recording the observations the rollout started from."""

    def __init__(self, backend, at: int) -> None:
        super().__init__(backend, owned=True)
        self.calls, self.at, self.rollout_start, self.killed_in_flight = 0, at, None, False

    def score(self, requests):
        self.calls += 1
        if self.calls == self.at - 1:
            self.rollout_start = [r.observation for r in requests]
        if self.calls == self.at:
            threading.Thread(target=self._kill_in_flight, daemon=True).start()
        return super().score(requests)

    def _kill_in_flight(self) -> None:
        while not self.backend.in_flight:
            time.sleep(0.001)
        for process in self.backend.engine_processes():
            os.kill(process.pid, signal.SIGKILL)
        self.killed_in_flight = self.backend.in_flight


@pytest.mark.timeout(1200)
def test_a_dead_engine_stops_the_run_with_a_checkpoint_that_resumes(request, tmp_path: Path) -> None:
    """The doomed engine is the test's own (eager: no compile; a small KV cache), the resume runs on the session's
    engine, asked for only once the doomed one is gone (run alone, the two never hold memory at once)."""
    from llm_gym.lm.backends.vllm_backend import VLLMBackend

    config = PPOLoRAConfig(
        **_settings(num_envs=2, num_steps=3, minibatch_size=6, total_steps=12, checkpoint_every=1000)
    )
    doomed = KillTheEngineMidRollout(
        VLLMBackend(
            "smollm2-135m", dtype="float32", kv_cache_gib=0.25, enable_lora=True, engine_options={"enforce_eager": True}
        ),
        at=5,
    )  # 3 score calls per rollout: the 5th is the second step of the second rollout
    run = Run.create(ENV.env_id, "ppo_lora", to_dict(config), path=tmp_path / "run")
    try:
        with pytest.raises(EngineStoppedError) as error:
            train(config, ENV, run, [], agent="ppo_lora", rollout_engine=doomed)
    finally:
        run.close()
        doomed.close()
    message = str(error.value)
    print(message)
    assert "\n" not in message and "--resume" in message and "step_6" in message
    assert doomed.calls == 5 and doomed.killed_in_flight, "the engine died while a request was with it"
    checkpoint = tmp_path / "run" / "checkpoints" / "step_6"
    assert [c.name for c in (tmp_path / "run" / "checkpoints").iterdir()] == ["step_6"]
    # The checkpoint holds the envs as the dropped rollout found them, not where it had moved them.
    assert load_envs(checkpoint)["observations"] == doomed.rollout_start

    resumed = Run.open(tmp_path / "run")
    resumed.resumed_from = resumed.latest_verified_checkpoint()
    assert resumed.resumed_from == checkpoint
    starts: list[int] = []

    class Start(Callback):
        def on_training_start(self, env_id, config, start_step) -> None:
            starts.append(start_step)

    engine = request.getfixturevalue("engine")
    summary = train(config, ENV, resumed, [Start()], agent="ppo_lora", rollout_engine=engine)
    resumed.close()
    assert starts == [6] and summary["env_steps"] == 12
