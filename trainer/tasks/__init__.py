"""Tiny local lm-evaluation-harness tasks shipped with gatesweep.

``gatesweep_tiny_mc`` (multiple choice -> loglikelihood), ``gatesweep_tiny_gen`` (copy a word ->
generate_until, exact match), ``gatesweep_tiny_ppl`` (rolling perplexity) and
``gatesweep_tiny_hellaswag`` (six hand-written items through lm-eval's own hellaswag config).
Their JSONL data sits beside the YAML; ``trainer.benchmarks.prepare_task_dir`` makes the paths
absolute.
"""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent
TINY_TASKS = ("gatesweep_tiny_mc", "gatesweep_tiny_gen", "gatesweep_tiny_ppl",
              "gatesweep_tiny_hellaswag")
