"""`tsbench sft-baseline`'s settings; defaults are the paper's (timerlm-anomalyxl Appendix C).

Every field is declared once with its default, docstring and range; `core.config.build` fills it
from the [sft] table and the flags and checks the ranges, and `sft.checked` the rules that span
settings. The formats are data builders (sft_data.py, sft_timemaster.py, tslm_sft.py) in front of
one trainer call (sft.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tsbench.core.settings import setting
from tsbench.models.tslm.settings import TSLMSettings
from tsbench.train.config import PolicyConfig

SINGLE_PASS = "single-pass-text"
RLM_TRAJECTORIES = "rlm-trajectories"
TIMEMASTER_TRACES = "timemaster-traces"  # <think>/<class> traces: TimeMaster's warm start (train/sft_timemaster.py)
FORMATS = (SINGLE_PASS, RLM_TRAJECTORIES, TIMEMASTER_TRACES)


def _sft_policy() -> PolicyConfig:
    return PolicyConfig(lora=16, lora_alpha=32, lora_dropout=0.05, lora_target="q_proj,v_proj")


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
    policy: PolicyConfig = field(default_factory=_sft_policy)
    tslm: TSLMSettings = field(default_factory=TSLMSettings)  # --model tslm/<arch> only ([sft.tslm])
