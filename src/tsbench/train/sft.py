"""`tsbench sft-baseline`: one entry, one trainer call, for every format (LoRA by default, or full).

A format is a data builder (train/sft_format.py) that checks its data before any weights load, then
loads its model and hands back datasets:
- single-pass-text and rlm-trajectories (train/sft_text.py): a language model on TRL's SFTTrainer,
  pre-tokenized rows whose loss mask is the policy's own replies;
- timemaster-traces (train/sft_timemaster.py): TimeMaster's warm start on TRL's SFTTrainer, images
  through TRL's vision collator for a vision-language model;
- `--model tslm/<arch>` or `toto/<checkpoint>` (train/tslm_sft.py): a TSLM on transformers' Trainer,
  through a module whose forward is the TSLM's own answer loss.

What they share is here: the trainer's arguments (`trainer_args`, built once from SFTConfig), the
validation loss before training and after each epoch (TRL's / transformers' evaluation), the
validation primary metric (greedy answers to the held-out rows, scored by the family), early
stopping on the loss (patience), the best epoch (highest primary metric, then lowest loss) written
to the output dir as it happens, and the run dir: run.json, metrics.parquet (per epoch) and
steps.parquet (per step). Warmup is floor(warmup x steps) optimizer steps, so a run shorter than
1 / warmup steps starts at the full learning rate instead of spending its only step at 0.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from tsbench.core.own_folder import record_owned
from tsbench.core.provenance import TRACKED_PACKAGES, git_commit, versions, write_json
from tsbench.core.tracking import check_targets
from tsbench.tasks import get_taskset
from tsbench.train.cpu_memory import limit_malloc_arenas
from tsbench.train.sft_config import (
    TIMEMASTER_TRACES,
    TRAINED_KIND,
    SFTConfig,
    is_series_model,
    prepare_out,
    warmup_steps,
)
from tsbench.train.sft_format import Format, Prepared
from tsbench.train.tracking import tracking

RUN_JSON = "run.json"
METRICS = "metrics.parquet"
STEPS = "steps.parquet"
CHECKPOINTS = "checkpoints"

ProgressFn = Callable[[str, dict], None]  # (event, fields)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def open_format(cfg: SFTConfig) -> Format:
    """The format of this run, its settings checked and its data read: bad input fails before a model loads."""
    if is_series_model(cfg.policy.model):
        from tsbench.train.tslm_sft import SeriesFormat

        return SeriesFormat(cfg)
    if cfg.format == TIMEMASTER_TRACES:
        from tsbench.train.sft_timemaster import TraceFormat

        return TraceFormat(cfg)
    from tsbench.train.sft_text import TextFormat

    return TextFormat(cfg)


def trainer_args(cfg: SFTConfig, prepared: Prepared, out: Path, total_steps: int) -> Any:
    """TRL's SFTConfig or transformers' TrainingArguments from the run's settings, with the format's own
    fields on top. Checkpoints are not written: the best epoch goes to the output dir as it is found."""
    from transformers import TrainingArguments
    from trl import SFTConfig as TRLConfig

    values = {
        "output_dir": str(out / CHECKPOINTS),
        "num_train_epochs": cfg.epochs,
        "per_device_train_batch_size": cfg.batch_size,
        "per_device_eval_batch_size": 1,
        "learning_rate": cfg.lr,
        "weight_decay": cfg.weight_decay,
        "max_grad_norm": cfg.grad_clip if cfg.grad_clip > 0 else 1e9,
        "lr_scheduler_type": "linear",
        "warmup_steps": warmup_steps(cfg.warmup, total_steps),
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "eval_strategy": "epoch" if prepared.val is not None else "no",
        "save_strategy": "no",
        "gradient_checkpointing": cfg.gradient_checkpointing,
        "bf16": prepared.on_gpu,
        "fp16": False,
        "use_cpu": not prepared.on_gpu,
        "logging_steps": 1,
        "report_to": check_targets(cfg.report_to),
        "disable_tqdm": True,
        **prepared.args,
    }
    return (TRLConfig if prepared.trl else TrainingArguments)(**values)


# -- validation ---------------------------------------------------------------------------------
class Validation(TrainerCallback):
    """After each epoch's evaluation (the val loss): the primary metric from greedy replies to the
    held-out rows, scored by the family; the best epoch saved; early stopping on the loss; one row per epoch."""

    def __init__(self, prepared: Prepared, cfg: SFTConfig, out: Path, emit: Callable):
        self.prepared = prepared
        self.cfg = cfg
        self.out = out
        self.emit = emit
        self.taskset = get_taskset(cfg.family)
        self.trainer: Any = None  # set once built: the best epoch is saved through it
        self.active = False  # the evaluation before training only measures where SFT starts
        self.best_loss, self.bad_epochs, self.best_key = math.inf, 0, (-math.inf, -math.inf)
        self.epochs: list[dict] = []
        self.started = time.perf_counter()

    def on_train_begin(self, *_: Any, **__: Any) -> None:
        self.active = True

    def primary(self, model: Any) -> dict:
        scores, valid, by_category = [], [], {}
        was_training = model.training
        model.eval()
        try:
            for e in self.prepared.held_out:
                scored = self.taskset.score(e.category, e.gold, self.prepared.reply(model, e))
                scores.append(scored.score)
                valid.append(scored.valid)
                by_category.setdefault(e.category, []).append(scored.score)
                self.emit("val_row", score=scored.score)
        finally:
            model.train(was_training)
        return {
            "val_primary": float(np.mean(scores)) if scores else math.nan,
            "val_valid": float(np.mean(valid)) if valid else math.nan,
            "val_by_category": json.dumps({c: float(np.mean(v)) for c, v in by_category.items()}, sort_keys=True),
        }

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict | None = None, model: Any = None, **_: Any
    ) -> None:
        if not self.active or metrics is None or model is None:
            return
        extra = self.primary(model)
        loss = float(metrics.get("eval_loss", math.nan))
        if loss < self.best_loss:
            self.best_loss, self.bad_epochs = loss, 0
        else:
            self.bad_epochs += 1
        stop = self.bad_epochs >= self.cfg.patience
        control.should_training_stop = control.should_training_stop or stop
        primary = extra["val_primary"]
        key = (primary if primary == primary else -math.inf, -loss if loss == loss else -math.inf)
        saved = not self.epochs or key > self.best_key
        if saved:
            self.best_key = key
            for row in self.epochs:
                row["saved"] = False
            self.prepared.save(self.trainer, self.out)
        epoch = int(round(state.epoch or 0))
        losses = [h["loss"] for h in state.log_history if "loss" in h and math.ceil(h.get("epoch", 0) - 1e-9) == epoch]
        self.epochs.append(
            {
                "epoch": epoch,
                "train_loss": float(np.mean(losses)) if losses else math.nan,
                "val_loss": loss,
                **extra,
                "val_rows": len(self.prepared.held_out),
                "step": int(state.global_step),
                "seconds": time.perf_counter() - self.started,
                "saved": saved,
            }
        )
        self.emit("epoch_end", **self.epochs[-1], stop=stop)


class StepEvents(TrainerCallback):
    def __init__(self, emit: Callable):
        self.emit = emit

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **_: Any) -> None:
        if logs and "loss" in logs:
            self.emit("step", step=state.global_step, steps=state.max_steps, loss=float(logs["loss"]))


# -- the run ------------------------------------------------------------------------------------
def run_sft(cfg: SFTConfig, progress: ProgressFn | None = None) -> Path:
    """Fine-tune, validate every epoch, keep the best epoch in cfg.out; returns the output dir."""
    import pandas as pd
    import torch
    from transformers import PrinterCallback, Trainer
    from trl import SFTTrainer

    def emit(event: str, **values: Any) -> None:
        if progress is not None:
            progress(event, values)

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    fmt = open_format(cfg)  # settings checked and data read: bad input fails before a model loads
    cfg = fmt.cfg
    out = prepare_out(cfg)
    started = time.perf_counter()
    if not torch.cuda.is_available():
        limit_malloc_arenas()  # a lower CPU peak (train/cpu_memory.py)
    torch.manual_seed(cfg.seed)
    prepared = fmt.prepare(out, emit)
    steps_per_epoch = math.ceil(len(prepared.train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    args = trainer_args(cfg, prepared, out, total)
    validation = Validation(prepared, cfg, out, emit)
    manifest = {
        "kind": "sft-baseline",
        **prepared.record,
        "config": asdict(cfg),
        "data": prepared.data,
        "model": prepared.model_record,
        "optimizer": {
            "steps_per_epoch": steps_per_epoch,
            "total_steps": total,
            "warmup_steps": args.warmup_steps,
            "schedule": f"linear warmup, {prepared.args.get('lr_scheduler_type', 'linear')} decay",
        },
        "eval_hint": prepared.eval_hint,
        "versions": versions((*TRACKED_PACKAGES, "peft", "trl")),
        "git_commit": git_commit(),
        "created_at": _now(),
        "complete": False,
    }
    write_json(out / RUN_JSON, manifest)
    shared = {
        "model": prepared.model,
        "args": args,
        "train_dataset": prepared.train,
        "eval_dataset": prepared.val,
        "data_collator": prepared.data_collator,
        "processing_class": prepared.processing_class,
        "callbacks": [validation, StepEvents(emit)],
    }
    with tracking(cfg.report_to, out):
        trainer = SFTTrainer(**shared, peft_config=prepared.peft_config) if prepared.trl else Trainer(**shared)
        trainer.remove_callback(PrinterCallback)
        validation.trainer = trainer
        n_train = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        n_all = sum(p.numel() for p in trainer.model.parameters())
        before = trainer.evaluate()["eval_loss"] if prepared.val is not None else None
        trainer.train()
    if not validation.epochs:  # no validation data: the last epoch
        prepared.save(trainer, out)
    shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
    for name in ("training_args.bin", "README.md"):
        (out / name).unlink(missing_ok=True)

    epochs = validation.epochs or [
        {"epoch": cfg.epochs, "train_loss": math.nan, "val_loss": math.nan, "val_primary": math.nan, "saved": True}
    ]
    epochs[-1]["step"] = epochs[-1].get("step", trainer.state.global_step)
    pd.DataFrame(epochs).to_parquet(out / METRICS, index=False)
    steps = [
        {
            "step": h["step"],
            "epoch": h.get("epoch"),
            "loss": h["loss"],
            "grad_norm": h.get("grad_norm"),
            "lr": h.get("learning_rate"),
        }
        for h in trainer.state.log_history
        if "loss" in h
    ]
    pd.DataFrame(steps).to_parquet(out / STEPS, index=False)
    best = next((r for r in epochs if r["saved"]), epochs[-1])
    manifest["model"].update(trainable_params=n_train, total_params=n_all)
    manifest.update(
        complete=True,
        updated_at=_now(),
        seconds=time.perf_counter() - started,
        val_loss_before=before,
        epochs_run=len(validation.epochs) or cfg.epochs,
        best_epoch=best["epoch"],
        best_val_primary=best["val_primary"] if validation.epochs else None,
        stopped_early=len(validation.epochs) < cfg.epochs and bool(validation.epochs),
    )
    write_json(out / RUN_JSON, manifest)
    record_owned(out, TRAINED_KIND)  # what --overwrite may later replace: this folder, as written
    emit("done", out=str(out), best_epoch=manifest["best_epoch"])
    return out


class RichSFTProgress:
    """Rich output for run_sft: `run_sft(cfg, RichSFTProgress(console))`."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self.console = console or Console(stderr=True)

    def __call__(self, event: str, values: dict) -> None:
        if event == "load_start":
            self.console.print(f"loading {values['model']}", markup=False)
        elif event == "step" and (values["step"] % 10 == 0 or values["step"] == values["steps"]):
            self.console.print(f"step {values['step']}/{values['steps']}  loss {values['loss']:.4f}", markup=False)
        elif event == "epoch_end":
            self.console.print(
                f"epoch {values['epoch']}: train loss {values['train_loss']:.4f}  val loss {values['val_loss']:.4f}  "
                f"val primary {values['val_primary']:.3f}" + ("  early stop" if values["stop"] else ""),
                markup=False,
            )
        elif event == "done":
            self.console.print(f"best epoch {values['best_epoch']}; model in {values['out']}", markup=False)
