"""Demonstrations: decisions of any policy (or ground truth) as chat-format JSONL that fine-tuning reads
(:mod:`llm_gym.demos.format`)."""

from llm_gym.demos.format import DemoRecord, parse_record, read_demos, write_records

__all__ = ["DemoRecord", "parse_record", "read_demos", "write_records"]
