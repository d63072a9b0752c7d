"""`tsbench sft-baseline`'s settings; defaults are the paper's (timerlm-anomalyxl Appendix C).

Every field is declared once with its default, docstring and range; `core.config.build` fills it
from the [sft] table and the flags and checks the ranges, and `sft.checked` the rules that span
settings. The formats are data builders (sft_text.py, sft_timemaster.py, tslm_sft.py) in front of
one trainer call (sft.py).
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.core.own_folder import check_replaceable
from tsbench.core.settings import check, setting
from tsbench.core.tracking import check_targets
from tsbench.models.tslm.settings import TSLMSettings
from tsbench.tasks import get_taskset
from tsbench.train.config import PolicyConfig

TRAINED_KIND = "trained-model"  # what core.own_folder records a training output folder as
SINGLE_PASS = "single-pass-text"
RLM_TRAJECTORIES = "rlm-trajectories"
TIMEMASTER_TRACES = "timemaster-traces"  # <think>/<class> traces: TimeMaster's warm start (train/sft_timemaster.py)
FORMATS = (SINGLE_PASS, RLM_TRAJECTORIES, TIMEMASTER_TRACES)
DEFAULT_DATA = "data/anomalyxl/seed42"
ANOMALYXL = "anomalyxl"


@dataclass
class SFTConfig:
    """`tsbench sft-baseline` for a language model, a TSLM (tslm/<arch>) or Toto (toto/<checkpoint>)."""

    format: str = setting(
        SINGLE_PASS,
        "LMs: single-pass-text, rlm-trajectories or timemaster-traces (JSONL files or teacher eval runs; VLMs too).",
        choices=FORMATS,
    )
    family: str = setting(
        "anomalyxl",
        "The task family whose rows (single-pass-text) and scorer (validation) SFT uses (name or module:attribute).",
    )
    data: list[str] = setting(
        factory=list,
        doc="single-pass-text: one dataset dir holding the family's train (and val) split [data/anomalyxl/seed42]; "
        "rlm-trajectories: one or more eval run dirs (results/<run>).",
    )
    regime: str | None = setting(
        None,
        "AnomalyXL: precise or coarse (rlm-trajectories also: both) [precise | both]; another family: one value of "
        "its rows' regime [all rows].",
    )
    epochs: int = setting(5, "Epochs.", ge=1)
    lr: float = setting(1e-4, "Learning rate.", ge=0)
    weight_decay: float = setting(0.01, "AdamW weight decay.", ge=0)
    grad_clip: float = setting(1.0, "Max gradient norm (0: no clipping).", ge=0)
    warmup: float = setting(
        0.03, "Warmup: this fraction of the optimizer steps, rounded down (a 1-step run does not warm up).", ge=0, lt=1
    )
    batch_size: int = setting(1, "Batch size.", ge=1)
    patience: int = setting(3, "Epochs without a lower val loss before stopping.", ge=1)
    val_rows: int = setting(500, "Validation rows.", ge=0)
    train_rows: int | None = setting(
        None, "Training rows, spread round-robin over categories [all; the paper: ~5,000].", ge=1
    )
    min_score: float = setting(0.5, "rlm-trajectories: keep episodes scoring at least this.")
    workers: int = setting(2, "--model classical: feature-extraction processes (1: in this process).", ge=1)
    include_test_split: bool = setting(
        False, "rlm-trajectories: allow episodes on test rows (contaminates the benchmark)."
    )
    max_seq_len: int | None = setting(
        None, "Longest example in tokens; longer ones are dropped [the model's context].", ge=1
    )
    text_budget_chars: int | None = setting(
        None, "single-pass-text: serialized characters [fitted to max_seq_len].", ge=1
    )
    val_max_new_tokens: int = setting(128, "Tokens generated per validation example.", ge=1)
    gradient_checkpointing: bool = setting(
        False, "Recompute activations in the backward pass (less memory, more time)."
    )
    out: str | None = setting(None, "Output dir [models/sft-<model>-<format>-<regime>].")
    report_to: list[str] = setting(
        factory=list,
        doc="Track the run: tensorboard and/or wandb (offline), under the out dir (pip install 'tsbench[tracking]').",
    )
    seed: int = setting(0, "LoRA init, shuffling and held-out trajectories.")
    overwrite: bool = setting(False, "Replace an existing output dir.")
    policy: PolicyConfig = field(
        default_factory=lambda: PolicyConfig(lora=16, lora_alpha=32, lora_dropout=0.05, lora_target="q_proj,v_proj")
    )
    tslm: TSLMSettings = field(default_factory=TSLMSettings)  # --model tslm/<arch> only ([sft.tslm])


# -- the checks every format starts with (sft_text.py, sft_timemaster.py, tslm_sft.py) ---------------
def checked(cfg: SFTConfig) -> SFTConfig:
    """A copy with defaults filled in; bad values are one-line UserErrors."""
    cfg = SFTConfig(**{k: getattr(cfg, k) for k in cfg.__dataclass_fields__})
    check(cfg)  # every setting's declared range and choices (a config built in Python skipped build's check)
    cfg.data = [cfg.data] if isinstance(cfg.data, (str, Path)) else [str(d) for d in cfg.data]
    get_taskset(cfg.family)  # an unknown family fails here, before any data is read
    if cfg.family == ANOMALYXL:  # its two regimes answer in different formats: one at a time (the paper's)
        cfg.regime = cfg.regime or ("precise" if cfg.format == SINGLE_PASS else "both")
        allowed = ("precise", "coarse") if cfg.format == SINGLE_PASS else ("precise", "coarse", "both")
        if cfg.regime not in allowed:
            raise UserError(f"--regime must be {', '.join(allowed)} for {cfg.format} (got {cfg.regime})")
    if cfg.format == TIMEMASTER_TRACES and not cfg.data:
        raise UserError("--format timemaster-traces needs --data: trace JSONL files or teacher eval run dirs")
    if cfg.format == RLM_TRAJECTORIES and not cfg.data:
        raise UserError("--format rlm-trajectories needs --data results/<run> (eval results with RLM transcripts)")
    if cfg.format == SINGLE_PASS and len(cfg.data) > 1:
        raise UserError("--format single-pass-text takes one --data dir (a dataset seed dir)")
    problems = cfg.policy.problems()
    if problems:
        raise UserError("; ".join(problems))
    check_targets(cfg.report_to)
    if cfg.out is None:
        slug = cfg.policy.model.removeprefix("local/").strip("/").replace("/", "_").replace(":", "_")
        cfg.out = str(Path("models") / f"sft-{slug}-{cfg.format}-{cfg.regime or get_taskset(cfg.family).name}")
    return cfg


TSLM_PREFIX = "tslm/"  # --model tslm/<arch>: a TSLM baseline (train/tslm_sft.py)
TOTO_PREFIX = "toto/"  # --model toto/<checkpoint>: Toto-1.0-QA


def is_series_model(spec: str) -> bool:
    """A model tsbench builds itself around a series encoder (no Hugging Face policy files to read)."""
    return spec.startswith((TSLM_PREFIX, TOTO_PREFIX))


def default_data(cfg: SFTConfig) -> str:
    """The dataset dir a format reads when --data is not given."""
    return DEFAULT_DATA if cfg.family == ANOMALYXL else str(get_taskset(cfg.family).default_root())


def warmup_steps(fraction: float, total_steps: int) -> int:
    """floor(fraction x steps): warmup never covers a whole short run (HF's ceil makes a 1-step run train at lr 0)."""
    return int(math.floor(fraction * total_steps))


def prepare_out(cfg: SFTConfig) -> Path:
    out = Path(cfg.out)
    if out.exists() and any(out.iterdir()):
        if not cfg.overwrite:
            raise UserError(f"{out} already holds files; use another --out, or --overwrite to replace it")
        check_replaceable(out, TRAINED_KIND, "a trained model's folder", marker="run.json")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out
