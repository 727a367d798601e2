"""gatesweep's trainer: the gated-attention LM, DeepSpeed training, data, probes, evaluation.

Import what you need from its modules: ``from trainer.train import train, TrainResult`` (imports
torch), ``from trainer.preempt import Preempted`` (no torch: callers catch it without training).
The run contract it trains (RunSpec, GateSpec, metric names, the Reporter protocol) lives one floor
down, in the torch-free ``contract`` package; this package never imports ``results_db``.
"""
