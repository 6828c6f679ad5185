"""What merging repeated demos saves ``sft``: one training batch's forward + backward through the trainable layers when
each distinct demo of the batch runs once and is counted as often (``Batches.merge_repeats``, the default) against one
row per demo, on the same batches of the same model in the same run.

The demos are the learning demo's: the exact best response's games of Kuhn poker against the uniformly random
opponent (``make demo``), where a batch of 16 holds about 7.5 distinct decisions. Each round times both arms on the
same batches, interleaved; the ratio is the median of the per-round ratios, so load from other processes hits both
alike. The gradients of the two arms on the first batch are compared too (they must agree: the merge is exact).

Prints JSON.

    python benchmarks/sft_repeats.py [--model smollm2-135m] [--games 256] [--batch-size 16] [--batches 8]
        [--rounds 3] [--trainable-layers 4] [--threads 0]
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
from llm_gym.agents.sft.batches import Batches, accumulate
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.demos.format import read_demos
from llm_gym.demos.record import record_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.plugins import get_agent

ENV = "OpenSpiel-kuhn_poker-v0"


def gradients(ac: ActorCritic) -> list[torch.Tensor]:
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in ac.trainable_parameters()]


def timed(data: Batches, ac: ActorCritic, batches: list[list[int]], config: SFTConfig, merge: bool) -> float:
    data.merge_repeats = merge
    start = time.perf_counter()
    for index in batches:
        ac.model.zero_grad(set_to_none=True)
        ac.value_head.zero_grad(set_to_none=True)
        accumulate(data, ac, index, config)
    return time.perf_counter() - start


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--games", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--trainable-layers", type=int, default=4)
    args = parse_lm_args(parser)
    torch.manual_seed(0)  # the value head's initialisation
    env = EnvConfig(ENV)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kuhn.jsonl"
        record_demos(get_agent("best_response")().policy(env), env, args.games, path, source={"agent": "best_response"})
        records = read_demos(path)
    config = SFTConfig(model=args.model, demos=str(path), dtype="auto", trainable_layers=args.trainable_layers,
                       minibatch_size=args.batch_size, micro_batch_size=args.batch_size, progress=False)  # fmt: skip
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(env).instructions)
    encoder = DemoEncoder(ac.builder, with_end=True)
    data = Batches(ac, [encoder.encode(r, r.return_to_go) for r in records], args.batch_size)
    order = torch.randperm(len(records), generator=torch.Generator().manual_seed(0)).tolist()
    batches = [order[i : i + args.batch_size] for i in range(0, args.batch_size * args.batches, args.batch_size)]
    ac.model.train()

    agreement = {}
    for merge in (True, False):
        timed(data, ac, batches[:1], config, merge)  # warm-up, and the first batch's gradient
        agreement[merge] = gradients(ac)
    max_difference = max(float((a - b).abs().max()) for a, b in zip(agreement[True], agreement[False], strict=True))
    largest = max(float(g.abs().max()) for g in agreement[False])

    merged_s, separate_s, ratios = [], [], []
    for _ in range(args.rounds):
        separate_s.append(timed(data, ac, batches, config, merge=False))
        merged_s.append(timed(data, ac, batches, config, merge=True))
        ratios.append(separate_s[-1] / merged_s[-1])
    rows = [len(data.repeats(index)) for index in batches]
    data.merge_repeats = True
    print(json.dumps({
        "env": ENV, "model": args.model, "demos": len(records), "games": args.games,
        "distinct_demos": len(data.repeats(list(range(len(records))))),
        "batch_size": args.batch_size, "batches": args.batches, "trainable_layers": args.trainable_layers,
        "threads": torch.get_num_threads(), "rows_per_batch_merged": statistics.mean(rows),
        "batch_s_separate": statistics.median(separate_s) / args.batches,
        "batch_s_merged": statistics.median(merged_s) / args.batches,
        "speedup_merged_vs_separate": statistics.median(ratios), "speedup_per_round": ratios,
        "first_batch_gradient_max_abs_difference": max_difference, "first_batch_gradient_max_abs": largest,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
