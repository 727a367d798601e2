"""The run contract: RunSpec and GateSpec (see docs/architecture.md, "Contracts").

Everything a training run needs is in one frozen, validated ``RunSpec``. The orchestrator
builds sweeps out of these models; the trainer never imports the orchestrator.

Variants are data: a gate is a ``GateSpec`` (five orthogonal dimensions), never a subclass.
Invalid combinations are rejected here, at load time, with the field named, so a bad sweep
fails before anything is written or scheduled.
"""

from __future__ import annotations

import math
import typing
from types import UnionType as _UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from contract import gate_positions as positions
from contract import identity
from contract.errors import format_path, pydantic_problems
from contract.params import check_param_match
from contract.presets import preset_fields

if TYPE_CHECKING:  # a Literal built from the table is a runtime value mypy cannot read
    Position = str
else:  # pydantic checks it and names every position in its error
    Position = Literal[positions.NAMES]
Granularity = Literal["elementwise", "headwise"]
Sharing = Literal["head_specific", "head_shared"]
Combine = Literal["multiplicative", "additive"]
Activation = Literal["sigmoid", "silu", "ns_sigmoid", "identity"]
Nonlinearity = Literal["none", "rmsnorm", "silu"]
Probe = Literal["attention_sink", "massive_activations", "gate_scores"]
# How initial weights are drawn (trainer/initialise.py). "paired": each parameter from a
# generator keyed by (seed, its qualified name), so two models at one seed start every weight
# they share equal; "legacy": the global RNG in module order, as every run stored before the
# field existed was (contract/identity.py ADDED reads a stored config without it so).
InitScheme = Literal["paired", "legacy"]


INT64_MAX = 2**63 - 1  # every integer must fit the results DB's 64-bit columns


def plain_number(v: Any, kinds: set[type]) -> Any:
    """THE number rule of every config and sweep file field (``kinds``: which of int/float/bool
    the field takes): finite (``allow_inf_nan=False`` does that part), within 64 bits, and
    never a boolean where a number is expected (YAML 1.1 reads yes/no/on/off as booleans:
    ``steps: yes`` must not become 1 step)."""
    if isinstance(v, bool):
        if kinds and bool not in kinds:
            raise ValueError("expected a number, got a boolean (YAML reads yes/no/on/off/"
                             "true/false as booleans)")
    elif isinstance(v, (int, float)) and (isinstance(v, int) or (math.isfinite(v)
                                                                and kinds == {int})) \
            and abs(v) > INT64_MAX:  # a float beyond 64 bits only matters for int fields
        text = f"{v:.3g}" if isinstance(v, float) else str(v)
        text = text if len(text) <= 24 else f"{text[:4]}... ({len(text)} digits)"
        raise ValueError(f"{text} is out of range; expected at most {INT64_MAX} "
                         "(a 64-bit integer)")
    return v


# An integer element of a list (a model field gets the rule from StrictModel): the same rule.
PlainInt = Annotated[int, BeforeValidator(lambda v: plain_number(v, {int}))]
# A seed is stored in the DB's 64-bit integer column; YAML booleans are not seeds.
Seed = Annotated[PlainInt, Field(ge=0, le=INT64_MAX)]


class StrictModel(BaseModel):
    """Frozen and strict (every config model, and the sweep file's): unknown keys are errors,
    never silently ignored; numbers obey ``plain_number`` (NaN/inf would reach the DB's JSON
    as ``Infinity``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_number(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, (int, float)):
            return v
        field = cls.model_fields.get(info.field_name or "")
        return plain_number(v, _number_kinds(field.annotation) if field is not None else set())


def _plain_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number_kinds(tp: Any) -> set[type]:
    """Which of int/float/bool a field accepts (optional and Literal-of-ints included)."""
    args = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, _UnionType) else (tp,)
    kinds = {a for a in args if a in (int, float, bool)}
    if any(typing.get_origin(a) is Literal and any(type(x) is int for x in typing.get_args(a))
           for a in args):
        kinds.add(int)
    return kinds


class GateSpec(StrictModel):
    """One gate. Defaults are the paper's winner: head-specific multiplicative sigmoid.

    position: G1 per-head SDPA output (before o_proj) | G2 value | G3 key | G4 query |
              G5 after o_proj. The gate reads the pre-normed hidden state X (same input as q/k/v).
    granularity: elementwise (one score per channel) | headwise (one score per head).
    sharing: head_specific | head_shared (per-head scores averaged over heads).
    combine: multiplicative (Y * act(XW)) | additive (Y + act(XW)).
    input_dependent: False = act(zero-initialised parameter), the paper's input-independent control.
    """

    position: Position = positions.DEFAULT
    granularity: Granularity = "elementwise"
    sharing: Sharing = "head_specific"
    combine: Combine = "multiplicative"
    activation: Activation = "sigmoid"
    input_dependent: bool = True

    @model_validator(mode="after")
    def _check(self) -> GateSpec:
        pos = positions.POSITIONS[self.position]
        no_heads = f"is not defined at position {pos.name} ({pos.where} there are no heads)"
        if not pos.has_heads and self.granularity == "headwise":
            raise ValueError(f"gates[].granularity: 'headwise' {no_heads}; use 'elementwise'")
        if not pos.has_heads and self.sharing == "head_shared":
            raise ValueError(f"gates[].sharing: 'head_shared' {no_heads}; use 'head_specific'")
        if self.granularity == "headwise" and self.sharing == "head_shared":
            raise ValueError("gates[].sharing: a headwise gate has one score per head, so "
                             "'head_shared' would make it a single scalar; use 'head_specific'")
        return self

    @property
    def label(self) -> str:
        """Short human label, e.g. 'G1/elementwise/sigmoid'."""
        parts: list[str] = [self.position, self.granularity]
        if self.sharing != "head_specific":
            parts.append("shared")
        if self.combine != "multiplicative":
            parts.append(self.combine)
        parts.append(self.activation)
        if not self.input_dependent:
            parts.append("const")
        return "/".join(parts)


class MoEConfig(StrictModel):
    """MoE FFN through deepspeed.moe.layer.MoE (top-k routing, load-balancing aux loss)."""
    n_experts: int = Field(ge=1)
    top_k: int = Field(default=2, ge=1)
    d_expert: int = Field(ge=1)  # SwiGLU hidden width of each expert
    aux_loss_coef: float = Field(default=0.01, ge=0)
    capacity_factor: float = Field(default=1.25, gt=0)
    ep_size: int = Field(default=1, ge=1)  # expert-parallel group size (multi-worker runs)

    @model_validator(mode="after")
    def _check(self) -> MoEConfig:
        if self.top_k > self.n_experts:
            raise ValueError(f"moe.top_k: {self.top_k} exceeds moe.n_experts ({self.n_experts})")
        if self.n_experts % self.ep_size:
            raise ValueError(f"moe.ep_size: {self.ep_size} must divide moe.n_experts "
                             f"({self.n_experts})")
        return self


class SwitchHeadConfig(StrictModel):
    """SwitchHead attention (Csordas et al. 2024): sigmoid-routed head experts."""
    targets: Literal["v", "kv"] = "v"
    n_experts: int = Field(default=4, ge=1)
    top_k: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _check(self) -> SwitchHeadConfig:
        if self.top_k > self.n_experts:
            raise ValueError(f"switch_head.top_k: {self.top_k} exceeds switch_head.n_experts "
                             f"({self.n_experts})")
        return self


NSACombine = Literal["gated", "learned", "equal"]


class NSAConfig(StrictModel):
    """Native Sparse Attention (Yuan et al. 2025, arXiv 2502.11089) in place of dense attention.

    Three branches over the model's own q/k/v (trainer/nsa.py): attention over compressed
    blocks (``compress_block`` tokens every ``compress_stride``, each block mapped to one key
    and one value), over the ``select_top_n`` selection blocks of ``select_block`` tokens that
    the compressed scores rank highest (the query's own block always among them), and over a
    sliding ``window`` of recent tokens. ``combine`` mixes them: ``gated`` NSA's own
    input-dependent sigmoid gate per head and branch, ``learned`` an input-independent sigmoid
    weight per head and branch, ``equal`` 1/3 each (no gate). The paper's sizes (32 / 16, 64
    x 16, 512) are for 64k contexts; the defaults fit the CPU models' 128-256 tokens.
    """
    compress_block: int = Field(default=16, ge=1)
    compress_stride: int = Field(default=8, ge=1)
    select_block: int = Field(default=16, ge=1)
    select_top_n: int = Field(default=4, ge=1)  # counts the query's own (always chosen) block
    window: int = Field(default=32, ge=1)  # tokens, the query's own included
    combine: NSACombine = "gated"

    @model_validator(mode="after")
    def _check(self) -> NSAConfig:
        block, d, sel = self.compress_block, self.compress_stride, self.select_block
        if d > block or block % d:  # NSA's d | l: blocks overlap by whole strides, none skipped
            raise ValueError(f"nsa.compress_stride: {d} must divide nsa.compress_block "
                             f"({block}); expected a divisor of {block}")
        if sel % d:  # NSA's d | l': each selection block is scored from whole strides
            raise ValueError(f"nsa.select_block: {sel} must be a multiple of "
                             f"nsa.compress_stride ({d})")
        return self

    def check_context(self, seq_len: int) -> None:
        """The sizes against the training context ``seq_len`` (RunSpec's check): a block
        larger than the context, a ragged last selection block, or more blocks to select than
        the context has are errors naming the key and what was expected."""
        for key, size in (("compress_block", self.compress_block),
                          ("select_block", self.select_block), ("window", self.window)):
            if size > seq_len:
                raise ValueError(f"model.nsa.{key}: {size} exceeds train.seq_len ({seq_len}); "
                                 f"expected at most {seq_len}")
        if seq_len % self.select_block:
            raise ValueError(f"model.nsa.select_block: {self.select_block} must divide "
                             f"train.seq_len ({seq_len}); expected a divisor of {seq_len}")
        n_sel = seq_len // self.select_block
        if self.select_top_n > n_sel:
            raise ValueError(f"model.nsa.select_top_n: {self.select_top_n} exceeds the "
                             f"{n_sel} selection blocks of train.seq_len ({seq_len}); expected "
                             f"1..{n_sel}")


class ModelConfig(StrictModel):
    """A decoder-only LM. Give ``preset`` (contract/presets.py) plus overrides, or every field.

    The preset is resolved at validation time; the resolved config keeps only numbers, so two
    spellings of the same model have the same fingerprint.
    """

    vocab_size: int = Field(default=256, ge=2)
    n_layer: int = Field(ge=1)
    d_model: int = Field(ge=1)
    n_head: int = Field(ge=1)
    n_kv_head: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    d_ff: int | None = Field(default=None, ge=1)  # SwiGLU hidden width (dense FFN)
    moe: MoEConfig | None = None
    rope_base: float = Field(default=10000.0, gt=0)
    qk_norm: bool = False
    tie_embeddings: bool = True
    gates: tuple[GateSpec, ...] = ()  # empty = ungated baseline; several = e.g. G1+G2
    nonlinearity: Nonlinearity = "none"  # non-linearity-only control at G1
    param_match: bool = False  # dense: shrink d_ff so gated total params == ungated
    norm_style: Literal["pre", "sandwich"] = "pre"  # the sandwich-norm baseline
    clip_residual: float | None = Field(default=None, gt=0)  # clamp the residual to +-c
    switch_head: SwitchHeadConfig | None = None  # the SwitchHead baseline
    nsa: NSAConfig | None = None  # Native Sparse Attention in every layer (None: dense)
    norm_eps: float = Field(default=1e-6, gt=0)
    init_std: float = Field(default=0.02, gt=0)
    init: InitScheme = "paired"

    @model_validator(mode="before")
    @classmethod
    def _resolve_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        preset = data.pop("preset", None)
        if preset is not None:
            data = {**preset_fields(preset), **data}
        if "head_dim" not in data and "d_model" in data and "n_head" in data:
            d_model, n_head = data["d_model"], data["n_head"]
            if _plain_int(d_model) and _plain_int(n_head) and n_head > 0:
                if d_model % n_head:  # else pydantic's "head_dim: Field required" says nothing
                    raise ValueError(f"model.head_dim: not given, and model.d_model ({d_model}) "
                                     f"is not divisible by model.n_head ({n_head}) to derive "
                                     f"it; give model.head_dim or make d_model a multiple of "
                                     f"n_head")
                data["head_dim"] = d_model // n_head
        if "n_kv_head" not in data and "n_head" in data:
            data["n_kv_head"] = data["n_head"]
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.head_dim % 2:  # at load time: the model would only find out at build time
            raise ValueError(f"model.head_dim: RoPE rotates channel pairs, so head_dim must be "
                             f"even; got {self.head_dim}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"model.n_kv_head: {self.n_kv_head} must divide model.n_head "
                             f"({self.n_head}) for grouped-query attention")
        if (self.d_ff is None) == (self.moe is None):
            raise ValueError("model: give exactly one of 'd_ff' (dense SwiGLU FFN) or 'moe'")
        if self.param_match and self.moe is not None:
            raise ValueError("model.param_match: only dense models can shrink d_ff to match "
                             "parameters; for MoE add experts or heads as a variant instead")
        gate_at = [g.position for g in self.gates]
        if len(set(gate_at)) != len(gate_at):
            raise ValueError(f"model.gates: at most one gate per position, got {gate_at}")
        site = positions.NONLINEARITY_SITE
        if self.nonlinearity != "none" and site in gate_at:
            raise ValueError(f"model.nonlinearity: the non-linearity-only control sits at "
                             f"{site}; it cannot be combined with a {site} gate")
        if self.param_match:  # the gates must fit into what the FFN can give back
            check_param_match(self)
        return self


class TrainConfig(StrictModel):
    steps: int = Field(default=200, ge=1)
    batch_size: int = Field(default=16, ge=1)  # micro-batch per worker
    grad_accum: int = Field(default=1, ge=1)
    seq_len: int = Field(default=128, ge=2)
    lr: float = Field(default=3e-3, gt=0)
    min_lr: float | None = Field(default=None, ge=0)  # None = lr / 10
    warmup: int = Field(default=20, ge=0)
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = Field(default=0.1, ge=0)
    grad_clip: float = Field(default=1.0, ge=0)  # 0 = off
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto: bf16 on CUDA, fp32 on CPU
    zero_stage: Literal[0, 1, 2, 3] = 0
    compile: bool = False  # torch.compile the model inside the engine (trainer/engine.py)
    eval_every: int = Field(default=50, ge=0)  # 0 = only at the end
    eval_batches: int = Field(default=8, ge=1)
    log_every: int = Field(default=10, ge=1)
    checkpoint_every: int = Field(default=100, ge=0)  # 0 = only the final checkpoint

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        for i, beta in enumerate(self.betas):  # else torch's AdamW refuses it after start-up
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"train.betas: {list(self.betas)}: each beta must be in "
                                 f"[0, 1); beta {i} is {beta}")
        if self.min_lr is not None and self.min_lr > self.lr:
            raise ValueError(f"train.min_lr: {self.min_lr} exceeds train.lr ({self.lr})")
        if self.warmup >= self.steps and self.steps > 1:
            raise ValueError(f"train.warmup: {self.warmup} must be below train.steps "
                             f"({self.steps})")
        return self

    @property
    def final_lr(self) -> float:
        return self.lr / 10 if self.min_lr is None else self.min_lr


class BpeSpec(StrictModel):
    """A byte-level BPE trained on the run's training files (trainer/bpe.py), cached by content.

    ``train_bpe`` is the vocabulary size (256 byte tokens + merges); the model's vocab_size
    follows it (RunSpec resolves it, or rejects a different explicit value).
    """

    train_bpe: int = Field(ge=257, le=1 << 20)
    min_frequency: int = Field(default=2, ge=1)
    # trained on the first sample_bytes of the training files (their fixed hash order): merges
    # settle long before 100 MB, and training time grows with the sample, encoding does not
    sample_bytes: int = Field(default=32_000_000, ge=1)


CODE_KEYS = ("roots", "include", "exclude", "max_bytes")  # python_code-only DataConfig keys


class DataConfig(StrictModel):
    source: Literal["synthetic", "text", "tokens", "hf", "python_code"] = "synthetic"
    path: str | None = None  # text: file or glob; tokens: .bin file
    name: str | None = None  # hf: dataset name (only when the user has it locally)
    # "bytes", a path to a local tokenizer.json, or {train_bpe: N} (python_code only)
    tokenizer: str | BpeSpec = "bytes"
    token_dtype: Literal["uint16", "uint32"] = "uint16"  # tokens source
    val_fraction: float = Field(default=0.05, gt=0, lt=1)  # python_code: of the files
    # python_code (trainer/corpus.py): "stdlib" | "site-packages" | a directory
    roots: tuple[str, ...] = Field(default=("stdlib",), min_length=1)
    include: tuple[str, ...] = Field(default=("**/*.py",), min_length=1)  # relative globs
    exclude: tuple[str, ...] = ()
    max_bytes: int | None = Field(default=None, ge=1)  # byte budget of the chosen files

    @field_validator("tokenizer", mode="before")
    @classmethod
    def _bpe_spec(cls, v: Any) -> Any:
        """A mapping is a BpeSpec: validate it as one, so its errors are not buried under the
        ``str`` branch's "Input should be a valid string"."""
        if not isinstance(v, dict):
            return v
        try:
            return BpeSpec.model_validate(v)
        except ValidationError as exc:
            first = pydantic_problems(exc)[0]
            key = format_path(first.path)
            why = (" (a byte-level BPE has the 256 byte tokens plus at least one merge)"
                   if key == "train_bpe" and first.kind == "greater_than_equal" else "")
            raise ValueError(f"data.tokenizer.{key}: {first.message}{why}") from None

    @model_validator(mode="after")
    def _check(self) -> DataConfig:
        if self.source in ("text", "tokens") and not self.path:
            raise ValueError(f"data.path: required when data.source is '{self.source}'")
        if self.source == "hf" and not self.name:
            raise ValueError("data.name: required when data.source is 'hf'")
        # compared with the defaults, not model_fields_set: a stored (fully dumped) config of
        # another source must load again
        stray = [k for k in CODE_KEYS
                 if getattr(self, k) != type(self).model_fields[k].get_default()]
        if stray and self.source != "python_code":
            raise ValueError(f"data.{stray[0]}: only used by data.source 'python_code' "
                             f"(data.source is '{self.source}')")
        if isinstance(self.tokenizer, BpeSpec) and self.source != "python_code":
            raise ValueError("data.tokenizer.train_bpe: a BPE is trained on the training files "
                             "of data.source 'python_code'; for other sources give 'bytes' or a "
                             "tokenizer.json path")
        return self


class BenchmarkSpec(StrictModel):
    """One lm-evaluation-harness task run at the end of training."""
    task: str
    num_fewshot: int = Field(default=0, ge=0)
    limit: int | None = Field(default=None, ge=1)
    include_path: str | None = None  # directory of local lm-eval task YAMLs


class LongContextConfig(StrictModel):
    """PPL at multiples of the training length, with RoPE extension methods."""
    factors: tuple[Annotated[int, Field(ge=1)], ...] = (1, 2, 4, 8)  # x train.seq_len
    methods: tuple[Literal["none", "linear", "ntk", "yarn"], ...] = ("none", "yarn")
    retrieval: bool = True
    batches: int = Field(default=2, ge=1)


class EvalConfig(StrictModel):
    probes: tuple[Probe, ...] = ("attention_sink", "massive_activations", "gate_scores")
    ppl_sets: dict[str, DataConfig] = Field(default_factory=dict)  # -> val/<set>/ppl
    benchmarks: tuple[BenchmarkSpec, ...] = ()
    longctx: LongContextConfig | None = None


class Resources(StrictModel):
    cpus: float = Field(default=1, gt=0)
    gpus: float = Field(default=0, ge=0)
    workers: int = Field(default=identity.DEFAULT_WORKERS, ge=1)


def _ppl_sets_inherit(data: dict[str, Any], tok: Any) -> dict[str, Any]:
    """Raw RunSpec input: each eval.ppl_sets entry without a tokenizer gets the run's
    data.tokenizer when that is a name or path (a stored spec then says it explicitly). A run
    that trains its BPE (``{train_bpe: N}``) has no path yet: its sets keep the default and
    trainer.batches.ppl_set_config gives them the trained file when the run opens its data."""
    ev = data.get("eval")
    sets = ev.get("ppl_sets") if isinstance(ev, dict) else None
    if not isinstance(ev, dict) or not isinstance(sets, dict) or not isinstance(tok, str):
        return data
    filled = {n: ({**c, "tokenizer": tok} if isinstance(c, dict) and "tokenizer" not in c else c)
              for n, c in sets.items()}
    return {**data, "eval": {**ev, "ppl_sets": filled}}


MAX_NAME_BYTES = 255  # NAME_MAX of ext4, XFS, btrfs, APFS: the longest folder name


def path_component_problem(v: str) -> str | None:
    """Why ``v`` cannot be one folder name (None: it can)."""
    if v in (".", ".."):
        return "is not a folder name"
    if any(c in v for c in "/\\") or any(ord(c) < 32 or ord(c) == 127 for c in v):
        return "must not hold '/', '\\' or control characters (it names a folder)"
    if len(v.encode("utf-8")) > MAX_NAME_BYTES:
        return (f"is {len(v.encode('utf-8'))} bytes long; a folder name holds at most "
                f"{MAX_NAME_BYTES} (shorten the variant or axis names)")
    return None


class RunSpec(StrictModel):
    """Everything one training run needs, fully resolved (contract)."""
    name: str = Field(min_length=1)
    sweep: str = Field(default="adhoc", min_length=1)
    seed: Seed = 0
    model: ModelConfig
    train: TrainConfig = Field(default_factory=TrainConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    resources: Resources = Field(default_factory=Resources)

    @field_validator("name", "sweep")
    @classmethod
    def _one_folder(cls, v: str) -> str:
        """name and sweep are folder names (<storage>/<sweep>/<name>/checkpoints): one path
        component a file system can create, so a bad one fails at validate, not when its
        trial starts -- and a stored config cannot lead a rerun out of its storage."""
        problem = path_component_problem(v)
        if problem:
            raise ValueError(f"{v[:80]!r}{'...' if len(v) > 80 else ''} {problem}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _vocab_from_bpe(cls, data: Any) -> Any:
        """``data.tokenizer: {train_bpe: N}`` sets model.vocab_size to N unless given."""
        if not isinstance(data, dict):
            return data
        tok = data.get("data", {}).get("tokenizer") if isinstance(data.get("data"), dict) else None
        model = data.get("model")
        if isinstance(tok, dict) and isinstance(model, dict) and "vocab_size" not in model \
                and isinstance(tok.get("train_bpe"), int):
            data = {**data, "model": {**model, "vocab_size": tok["train_bpe"]}}
        return _ppl_sets_inherit(data, tok)

    @model_validator(mode="after")
    def _check_engine(self) -> RunSpec:
        if self.model.moe is not None and self.train.zero_stage == 3:
            raise ValueError("train.zero_stage: DeepSpeed's MoE layer trains under ZeRO 0-2, "
                             "not 3; use zero_stage 0, 1 or 2 for MoE models")
        return self

    @model_validator(mode="after")
    def _check_nsa(self) -> RunSpec:
        if self.model.nsa is not None:
            self.model.nsa.check_context(self.train.seq_len)
        return self

    @model_validator(mode="after")
    def _check_tokenizers(self) -> RunSpec:
        tok = self.data.tokenizer
        if isinstance(tok, BpeSpec) and self.model.vocab_size != tok.train_bpe:
            raise ValueError(f"model.vocab_size: {self.model.vocab_size} differs from "
                             f"data.tokenizer.train_bpe ({tok.train_bpe}); drop model.vocab_size "
                             f"(it follows the tokenizer) or make them equal")
        for name, cfg in self.eval.ppl_sets.items():
            # The model's token ids mean what the run's tokenizer says: a set read with another
            # one would be scored on ids of another vocabulary (a silently wrong val/NAME/ppl).
            theirs, drop = cfg.tokenizer, f"; drop eval.ppl_sets.{name}.tokenizer (a set is read " \
                "with the run's tokenizer)"
            if isinstance(theirs, BpeSpec):
                raise ValueError(f"eval.ppl_sets.{name}.tokenizer: train_bpe is the run's "
                                 f"choice, not a set's{drop}")
            if isinstance(tok, BpeSpec) and theirs != "bytes":
                raise ValueError(f"eval.ppl_sets.{name}.tokenizer: {theirs!r}, but the run "
                                 f"trains its own BPE (data.tokenizer.train_bpe){drop}")
            if isinstance(tok, str) and theirs != tok:
                raise ValueError(f"eval.ppl_sets.{name}.tokenizer: {theirs!r} differs from "
                                 f"data.tokenizer {tok!r}{drop}")
        return self

    @classmethod
    def from_stored(cls, config: Any) -> RunSpec:
        """A RunSpec from a config stored before some of today's fields existed (the DB's runs,
        a checkpoint's spec): an absent added field takes the value those runs had
        (identity.ADDED), never today's default -- an old run reruns as it was trained."""
        return cls.model_validate(identity.with_added(config))

    def fingerprint(self) -> str:
        """sha256 of the canonical document of what determines the result: THE identity rule
        (contract/identity.py), which also derives the seed-group keys from it."""
        return identity.fingerprint(self.model_dump(mode="json"))

    @property
    def tokens_per_step(self) -> int:
        t = self.train
        return t.batch_size * t.grad_accum * t.seq_len * self.resources.workers
