"""gatesweep's trainer: the gated-attention LM, DeepSpeed training, data, probes, evaluation.

Import what you need from its modules: ``from trainer.train import train, TrainResult`` (imports
torch), ``from trainer.preempt import Preempted`` (no torch: callers catch it without training).
The run contract it trains (RunSpec, GateSpec, metric names, the Reporter protocol) lives one floor
down, in the torch-free ``contract`` package; this package never imports ``results_db``.

  train.py           ``train(spec, reporter, checkpoint_dir)``: one run, start to finish
  __main__.py        ``python -m trainer RUN.yaml``: one RunSpec without the orchestrator
  runfile.py         read that RunSpec YAML
  model.py           the decoder-only LM with attention gates (``build_model``)
  attention.py       causal self-attention with GQA, QK-norm, RoPE and gates G1..G5
  gates.py           one ``Gate`` module for every GateSpec
  switch_head.py     SwitchHead projections (the Table 6 baseline)
  nsa.py             Native Sparse Attention: three branches in place of dense attention
  nsa_blocks.py      NSA's block geometry: compressed and selection blocks, causal masks
  nsa_combine.py     NSA's branch combination: gated, learned or equal weights
  moe.py             feed-forward blocks: SwiGLU and a DeepSpeed MoE of SwiGLU experts
  norms.py           RMSNorm
  rope.py            rotary position embeddings with context-extension scaling
  initialise.py      paired initial weights: each parameter a function of (seed, its name)
  keyed.py           random draws keyed by name (a generator per key)
  meta_params.py     the parameter-count oracle: the real model on the meta device
  engine.py          the DeepSpeed engine: precision, config, optimizer, ``initialize``
  dist.py            single-process torch.distributed set-up without a launcher
  schedule.py        the learning-rate schedule
  stepstats.py       per-step statistics kept on the device, read back in batches
  stability.py       loss-spike and divergence detection
  checkpoint.py      atomic, rotating DeepSpeed checkpoints
  load.py            a trained GatedLM from a run's checkpoint, without DeepSpeed's engine
  preempt.py         graceful preemption: stop at a step boundary, checkpoint, say so
  provenance.py      one attempt's provenance with what only the trainer knows
  data.py            training and held-out data: the front door (torch-free on import)
  datacheck.py       what can be checked of the data without training
  batches.py         every batch a pure function of (seed, split, batch index)
  token_files.py     token arrays of the file-backed data sources
  tokenizer.py       tokenisers and the tokenised-corpus cache
  bpe.py             byte-level BPE trained on a corpus, cached by content
  corpus.py          the ``python_code`` corpus (Python sources already on the machine)
  evaluation.py      validation loss / perplexity and the mechanistic probes
  probes.py          attention sink, massive activations, gate scores
  final_eval.py      end-of-run benchmarks and long-context evals
  benchmarks.py      lm-evaluation-harness benchmarks for a trained model
  lm_eval_adapter.py a trained GatedLM as an lm-evaluation-harness ``LM``
  longctx.py         long-context extrapolation: PPL and needle recall
  tasks/             tiny local lm-evaluation-harness tasks
"""
