"""What ``frozen_cache`` saves an sft run at its start (and at every ``--resume``): preparing the demos' frozen-layer
output by running the frozen layers (``frozen_cache=off``, what every start paid before) against reading the file a
previous start wrote (the fingerprint of the weights below the split included), on the same demos and model in the
same run.

The demos are the solver's tic-tac-toe tree (``llm-gym demos --agent solver --all-replies``, both opponents' system
texts: 1,090 decisions), the first ``--demos`` of them, each row holding every legal move as the recipe's choice loss
packs it (``docs/results/sft_tic_tac_toe.md``). Each round times both arms, interleaved; the ratio is the
median of the per-round ratios, so load from other processes hits both alike. The read tensors are compared with the
computed ones (they must be equal: the file holds the pass's output).

Prints JSON.

    python benchmarks/sft_frozen_cache.py [--model smollm2-135m] [--demos 128] [--trainable-layers 8]
        [--batch-size 16] [--rounds 3] [--threads 0] [--dtype auto]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from lm_args import lm_parser, parse_lm_args

import llm_gym  # noqa: F401  (registers the ids)
from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft import frozen_cache
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.demos.format import read_demos
from llm_gym.demos.tree import record_demo_tree
from llm_gym.envs.catalog import EnvTraits
from llm_gym.lm.cpu import cpu_name
from llm_gym.plugins import get_agent

ENV = "OpenSpiel-tic_tac_toe-v0"


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--demos", type=int, default=128)
    parser.add_argument("--trainable-layers", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has AVX512-BF16 or AMX")
    args = parse_lm_args(parser)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tree.jsonl"
        for opponent in ("random", "mcts"):
            env = EnvConfig(ENV, {"opponent": opponent})
            record_demo_tree(get_agent("solver")().policy(env), env, path, source={"agent": "solver"})
        records = read_demos(path)[: args.demos]
        config = SFTConfig(model=args.model, demos=str(path), dtype=args.dtype, trainable_layers=args.trainable_layers,
                           minibatch_size=args.batch_size, progress=False)  # fmt: skip
        ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(ENV)).instructions)
        encoder = DemoEncoder(ac.builder, with_end=True)
        examples = [encoder.encode(r, r.return_to_go) for r in records]
        directory = Path(tmp) / "cache"

        def cached() -> Batches:  # what a start with frozen_cache on does: the fingerprint, then the file
            fingerprint = frozen_cache.bottom_fingerprint(ac)
            return Batches(ac, examples, args.batch_size, with_choices=True, cache=(directory, fingerprint))

        start = time.perf_counter()
        cached()  # the first start: computes and writes the file
        first_s = time.perf_counter() - start
        (file,) = directory.glob("*.safetensors")
        computed_s, read_s, ratios = [], [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            computed = Batches(ac, examples, args.batch_size, with_choices=True)
            computed_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            read = cached()
            read_s.append(time.perf_counter() - start)
            ratios.append(computed_s[-1] / read_s[-1])
        equal = all(torch.equal(a, b) for a, b in zip(computed.hidden, read.hidden, strict=True))
        start = time.perf_counter()
        frozen_cache.bottom_fingerprint(ac)
        fingerprint_s = time.perf_counter() - start
        print(json.dumps({
            "env": ENV, "model": args.model, "demos": len(examples), "distinct_rows": len(set(read.first_copy)),
            "trainable_layers": args.trainable_layers, "frozen_layers": ac.split_layer, "batch_size": args.batch_size,
            "dtype": str(read.hidden[0].dtype), "threads": torch.get_num_threads(), "cpu": cpu_name(), "file_mb": file.stat().st_size / 1e6,
            "file_mb_per_demo": file.stat().st_size / 1e6 / len(examples), "first_start_s": first_s,
            "computed_s": statistics.median(computed_s), "read_s": statistics.median(read_s),
            "fingerprint_s": fingerprint_s, "speedup_read_vs_computed": statistics.median(ratios),
            "speedup_per_round": ratios, "read_equals_computed": equal,
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
