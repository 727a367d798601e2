"""Load a trained GatedLM from a run's DeepSpeed checkpoint, without DeepSpeed's engine.

For ``orchestrator evaluate RUN`` and anything else that evaluates a finished run later.
Layout (trainer/checkpoint.py): ``checkpoint_dir/step_XXXXXXXX/`` holding DeepSpeed's files:
- ZeRO 0-2: ``mp_rank_00_model_states.pt`` with the full weights under ``module``; an MoE
  model keeps each expert in ``layer_<l>_expert_<e>_mp_rank_00_model_states.pt`` (keys already
  in the model's naming, global expert ids), merged here;
- ZeRO 3: only partitions (``zero_pp_rank_*``); DeepSpeed's ``zero_to_fp32`` gathers them,
  after ``check_pickles`` has refused any file that names more than tensors and plain values.
Every file is read weights-only (trainer.checkpoint.weights_only_load): a checkpoint directory
is input, and a full unpickle runs whatever code a planted file names.
The state dict is loaded strictly: a checkpoint of another model shape fails with the keys.
"""

from __future__ import annotations

from pathlib import Path

import torch

from contract.config import RunSpec
from trainer.checkpoint import check_pickles, latest_checkpoint, weights_only_load
from trainer.model import build_model

MODEL_STATES = "mp_rank_00_model_states.pt"


def find_checkpoint(checkpoint_dir: str | Path) -> Path:
    """The newest complete checkpoint tag directory; a clear error when there is none."""
    found = latest_checkpoint(checkpoint_dir)
    if found is None:
        raise FileNotFoundError(f"checkpoint_dir: no complete checkpoint (step_XXXXXXXX with "
                                f"gatesweep_meta.json) under {checkpoint_dir}")
    return found[1]


def checkpoint_state_dict(tag_dir: Path) -> dict[str, torch.Tensor]:
    """The full fp32 model state dict stored in one DeepSpeed checkpoint tag directory."""
    dense = tag_dir / MODEL_STATES
    if not dense.is_file():  # ZeRO 3: gather the partitions
        if not any(tag_dir.glob("zero_pp_rank_*_model_states.pt")):
            raise FileNotFoundError(f"checkpoint {tag_dir}: neither {MODEL_STATES} nor ZeRO-3 "
                                    "partitions (zero_pp_rank_*_model_states.pt) found")
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        check_pickles(tag_dir)  # zero_to_fp32 unpickles fully: only files that name nothing else

        return dict(get_fp32_state_dict_from_zero_checkpoint(str(tag_dir.parent),
                                                             tag=tag_dir.name))
    state = dict(weights_only_load(dense, "cpu")["module"])
    for expert_file in sorted(tag_dir.glob("layer_*_expert_*_" + MODEL_STATES)):
        state.update(weights_only_load(expert_file, "cpu"))
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def load_model_from_checkpoint(spec: RunSpec, checkpoint_dir: str | Path,
                               device: str | torch.device = "cpu") -> torch.nn.Module:
    """``build_model(spec.model)`` with the weights of the newest checkpoint, in eval mode."""
    tag_dir = find_checkpoint(checkpoint_dir)
    state = checkpoint_state_dict(tag_dir)
    model = build_model(spec.model)
    if spec.model.tie_embeddings and "lm_head.weight" not in state and "embed.weight" in state:
        state["lm_head.weight"] = state["embed.weight"]  # tied: saved once
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"checkpoint {tag_dir} does not fit the run's model.* config: "
                         f"missing {sorted(missing)[:8]}, unexpected {sorted(unexpected)[:8]}")
    return model.to(device).eval()
