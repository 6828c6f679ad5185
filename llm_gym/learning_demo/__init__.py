"""The learning demo behind ``make demo``: a language model measurably plays better after training, on held-out
seeds, in minutes on a CPU. Demonstrations of an exact best response -> ``sft`` -> greedy evaluation before and
after (one process, the model loaded once) -> a table with 95% intervals and a plot. Run it with
``python -m llm_gym.learning_demo``; docs/guides/learning_demo.md says what it shows and why this task."""

from llm_gym.learning_demo.config import LearningDemoConfig
from llm_gym.learning_demo.pipeline import Arm, LearningDemoResult, run_learning_demo, save_result
from llm_gym.learning_demo.report import summary_text, write_plot

__all__ = [
    "Arm",
    "LearningDemoConfig",
    "LearningDemoResult",
    "run_learning_demo",
    "save_result",
    "summary_text",
    "write_plot",
]
