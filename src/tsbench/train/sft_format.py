"""What an `sft-baseline` format hands the one trainer call in train/sft.py.

A format (train/sft_text.py: single-pass-text and rlm-trajectories; train/sft_timemaster.py:
timemaster-traces; train/tslm_sft.py: a TSLM or Toto-1.0-QA) is a data builder: it checks its data
before any weights load, then loads its model and turns rows into a dataset. Everything after that
(the trainer's arguments, validation, the best epoch, the run dir) is sft.py's, shared by all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class Prepared:
    """A format's model and data, ready to train."""

    model: Any  # what the trainer trains: a Hugging Face model, or a module whose forward returns {"loss"}
    train: Any  # the training dataset
    val: Any | None  # the validation loss's dataset; None: no validation (the last epoch is kept)
    save: Callable[[Any, Path], None]  # (trainer, dir): write the trained model where `local/` or `tslm/` loads it
    data: dict  # the run manifest's "data"
    model_record: dict  # the run manifest's "model"
    eval_hint: dict  # how to evaluate the result (model spec, harness, ...)
    trl: bool = True  # TRL's SFTTrainer (a language model) or transformers' Trainer (a module of our own)
    args: dict = field(default_factory=dict)  # the format's own TrainingArguments fields, over the shared ones
    held_out: list = field(default_factory=list)  # rows scored by the family after each epoch (.category, .gold)
    reply: Callable[[Any, Any], str] | None = None  # (trained model, held-out row) -> its greedy answer
    processing_class: Any = None
    peft_config: Any = None
    data_collator: Any = None
    on_gpu: bool = False
    record: dict = field(default_factory=dict)  # the format's own top-level manifest fields


class Format(Protocol):
    """Built from an SFTConfig: the constructor checks the settings (`cfg`: the checked copy) and reads
    (or refuses) the data; no weights load before `prepare`."""

    cfg: Any

    def prepare(self, out: Path, emit: Callable[..., None]) -> Prepared: ...
