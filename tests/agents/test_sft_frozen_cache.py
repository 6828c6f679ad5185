"""sft keeps the frozen layers' output of its demos on disk (``frozen_cache``), on a tiny random model and real
tic-tac-toe demos of the solver: a file holds exactly the tensors the pass computes; a resumed run and a run naming
the same directory read it instead of running the frozen layers; the key follows the weights below the split and the
rows, not the trainable layers; a damaged file is reported and recomputed; ``off`` and ``trainable_layers=0`` keep
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sft_demos import sft_settings, write_demos  # tests/agents/sft_demos.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft import SFTAgent, frozen_cache
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.config import to_dict
from llm_gym.demos.format import read_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.split import SplitLM
from llm_gym.plugins import get_agent
from llm_gym.runs import Run

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def ttt_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = EnvConfig(TTT)
    return write_demos(tmp_path_factory.mktemp("demos") / "ttt.jsonl", env, get_agent("solver")().policy(env), 6)


@pytest.fixture
def frozen_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows run through the frozen layers (each call of SplitLM.bottom appends its batch's row count)."""
    calls: list[int] = []
    original = SplitLM.bottom

    def counting(self: SplitLM, batch, prefix):  # type: ignore[no-untyped-def]
        calls.append(int(batch.input_ids.shape[0]))
        return original(self, batch, prefix)

    monkeypatch.setattr(SplitLM, "bottom", counting)
    return calls


def _train(path: Path, config: SFTConfig, resume: bool = False) -> dict:
    run = Run.open(path) if resume else Run.create(TTT, "sft", to_dict(config), path=path)
    if resume:
        run.resumed_from = run.latest_checkpoint()
    try:
        return SFTAgent(config).train(EnvConfig(TTT), run)
    finally:
        run.close()


def _batches(config: SFTConfig, demos: Path, directory: Path | None) -> tuple[ActorCritic, Batches]:
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(TTT)).instructions)
    examples = [DemoEncoder(ac.builder, True).encode(r) for r in read_demos(demos)]
    cache = (directory, frozen_cache.bottom_fingerprint(ac)) if directory else None
    return ac, Batches(ac, examples, batch_size=4, cache=cache)


def test_a_file_holds_exactly_what_the_pass_computes(tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos)
    _, computed = _batches(config, ttt_demos, None)
    _, written = _batches(config, ttt_demos, tmp_path)
    files = list(tmp_path.glob("*.safetensors"))
    assert len(files) == 1
    _, read = _batches(config, ttt_demos, tmp_path)
    assert len(read.hidden) == len(computed.hidden) > 0
    for a, b, c in zip(computed.hidden, written.hidden, read.hidden, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_a_resumed_run_reads_the_file_instead_of_the_frozen_layers(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path, frozen_passes: list[int]
) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, epochs=1, validation_fraction=0.25)
    _train(tmp_path / "run", config)
    assert sum(frozen_passes) > 0
    files = sorted((tmp_path / "run" / frozen_cache.CACHE_DIR).glob("*.safetensors"))
    assert len(files) == 2  # the training and the validation split
    frozen_passes.clear()
    more = sft_settings(tiny_model_dir, ttt_demos, epochs=2, validation_fraction=0.25)
    _train(tmp_path / "run", more, resume=True)
    assert frozen_passes == []
    # A run of its own naming a shared directory: the first computes, the second reads.
    shared = tmp_path / "shared"
    _train(tmp_path / "a", sft_settings(tiny_model_dir, ttt_demos, frozen_cache=str(shared)))
    assert frozen_passes and not (tmp_path / "a" / frozen_cache.CACHE_DIR).exists()
    frozen_passes.clear()
    _train(tmp_path / "b", sft_settings(tiny_model_dir, ttt_demos, frozen_cache=str(shared), learning_rate=1e-3))
    assert frozen_passes == []


def test_the_key_follows_the_frozen_weights_not_the_trainable_ones(tiny_model_dir: Path, ttt_demos: Path) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos)  # 2 layers, LoRA on the top one: layer 0 is frozen
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(TTT)).instructions)
    before = frozen_cache.bottom_fingerprint(ac)
    layers = ac.split.decoder.layers
    with torch.no_grad():
        layers[1].mlp.down_proj.base_layer.weight.add_(1.0)
    assert frozen_cache.bottom_fingerprint(ac) == before
    with torch.no_grad():
        layers[0].mlp.down_proj.weight[0, 0] += 1e-3
    assert frozen_cache.bottom_fingerprint(ac) != before
    rows = [((1, 2), ((3,),), (), True)]
    assert frozen_cache.rows_key(before, rows, 4) != frozen_cache.rows_key(before, rows, 8)
    assert frozen_cache.rows_key(before, rows, 4) != frozen_cache.rows_key(before, [((1, 2), ((4,),), (), True)], 4)


def test_a_damaged_file_is_reported_and_recomputed(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos)
    _, computed = _batches(config, ttt_demos, tmp_path)
    (path,) = tmp_path.glob("*.safetensors")
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    _, again = _batches(config, ttt_demos, tmp_path)
    assert "unreadable" in capsys.readouterr().err
    assert path.stat().st_size == size  # written again, whole
    for a, b in zip(computed.hidden, again.hidden, strict=True):
        assert torch.equal(a, b)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize(
    "settings", [{"frozen_cache": "off"}, {"trainable_layers": 0}], ids=["off", "no frozen layers"]
)
def test_nothing_is_kept_when_off_or_without_frozen_layers(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path, settings: dict
) -> None:
    _train(tmp_path / "run", sft_settings(tiny_model_dir, ttt_demos, epochs=1, **settings))
    assert not (tmp_path / "run" / frozen_cache.CACHE_DIR).exists()
