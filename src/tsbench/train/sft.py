"""`tsbench sft-baseline` for a language model, on TRL's SFTTrainer (LoRA by default, or full).

Two formats (sft_data.py builds the examples):
- `single-pass-text`: the single-pass-text harness's own prompt for a row of the task family
  (`--family`, AnomalyXL by default: one regime), answered with the family's `sft_target`; trained
  on the train split, validated on val (paper Appendix C), or on a seeded part of train held out
  when the family has no val split (TimerBed).
- `rlm-trajectories`: finished RLM episodes from eval results that scored at least `min_score`;
  the warm start before `train-grpo` (TimeMaster §3.4).

Examples reach TRL pre-tokenized, with an `assistant_masks` column: only the policy's own replies
(through their end-of-turn token) are trained; system, question and sandbox observations are
masked. That is TRL's assistant-only loss, with the mask built from the model's real chat template
turn by turn (sft_data.encode_conversation), so it works for templates TRL cannot patch.

After each epoch: the validation loss (TRL's evaluation) and the validation primary metric (greedy
generation, scored by the family's Taskset); early stopping watches the loss (patience); the model
kept in the output dir is the epoch with the highest primary metric. The output dir loads as
`local/<dir>`; beside it run.json, metrics.parquet (per epoch) and steps.parquet (per step).
Warmup is floor(warmup x steps) optimizer steps, so a run shorter than 1 / warmup steps starts at
the full learning rate instead of spending its only step at 0.
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

from tsbench.core.errors import UserError
from tsbench.core.provenance import TRACKED_PACKAGES, git_commit, versions, write_json
from tsbench.core.tracking import check_targets
from tsbench.tasks import get_taskset
from tsbench.train import sft_data as sd
from tsbench.train.cpu_memory import limit_malloc_arenas
from tsbench.train.sft_config import (
    ANOMALYXL,
    DEFAULT_DATA,
    RLM_TRAJECTORIES,
    SINGLE_PASS,
    TIMEMASTER_TRACES,
    SFTConfig,
    checked,
    prepare_out,
    warmup_steps,
)
from tsbench.train.tracking import tracking

RUN_JSON = "run.json"
METRICS = "metrics.parquet"
STEPS = "steps.parquet"
CHECKPOINTS = "checkpoints"

ProgressFn = Callable[[str, dict], None]  # (event, fields)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- data -----------------------------------------------------------------------------------------
def build_data(
    cfg: SFTConfig, tokenizer: Any, eos: set[int], max_seq_len: int, selected: Any
) -> tuple[list, list, dict]:
    if cfg.format == SINGLE_PASS:
        family = get_taskset(cfg.family)
        files = sd.split_files(family, cfg.data[0] if cfg.data else _default_data(cfg))
        train_refs = sd.balanced_refs(family, files["train"], cfg.train_rows, cfg.regime)
        val_refs = sd.balanced_refs(family, files["val"], cfg.val_rows, cfg.regime) if files["val"] else []
        val_from = "val"
        if not val_refs and cfg.val_rows:  # no val split (TimerBed): a seeded part of train is held out
            everything = sd.balanced_refs(family, files["train"], None, cfg.regime)
            order = np.random.default_rng(cfg.seed).permutation(len(everything))
            held = {everything[i].id for i in order[: min(cfg.val_rows, max(1, len(everything) // 10))]}
            val_refs = [r for r in everything if r.id in held]
            train_refs = sd.balanced_refs(family, files["train"], cfg.train_rows, cfg.regime, exclude=held)
            val_from = "train"
        budget = cfg.text_budget_chars
        if budget is None:
            n_categories = sd.rows_of(family, files["train"], cfg.regime)["category"].nunique()
            probe = [family.load(r) for r in sd.balanced_refs(family, files["train"], n_categories, cfg.regime)]
            probe = [p for p in probe if sd.target_problem(family, p) is None]
            if not probe:
                raise UserError(
                    f"no {family.name} train row of {cfg.data or _default_data(cfg)} can be an SFT example "
                    "(no series, or its sft_target does not score 1)"
                )
            answer = max(len(tokenizer(family.sft_target(p.task.category, p.gold))["input_ids"]) for p in probe) + 8
            budget = sd.fit_text_budget(
                tokenizer, [p.task for p in probe], max_seq_len, max(answer, cfg.val_max_new_tokens)
            )
        train, train_stats = sd.single_pass_examples(
            tokenizer, family, train_refs, text_budget_chars=budget, max_seq_len=max_seq_len, eos_ids=eos, split="train"
        )
        val, val_stats = (
            ([], sd.DataStats())
            if cfg.val_rows == 0
            else sd.single_pass_examples(
                tokenizer,
                family,
                val_refs,
                text_budget_chars=budget,
                max_seq_len=max_seq_len,
                eos_ids=eos,
                keep_prompt=True,
                split=val_from,
            )
        )
        used = {split: sorted({r.path for r in refs}) for split, refs in (("train", train_refs), ("val", val_refs))}
        info = {
            "format": SINGLE_PASS,
            "family": family.name,
            "regime": cfg.regime,
            "text_budget_chars": budget,
            "max_seq_len": max_seq_len,
            "val_from": val_from,
            "files": {
                split: [{"path": p, "sha256": sd.file_fingerprint(Path(p))} for p in paths]
                for split, paths in used.items()
            },
        }
    else:
        train_t, val_t, selection = selected
        train, train_stats = sd.trajectory_examples(tokenizer, train_t, max_seq_len=max_seq_len, eos_ids=eos)
        val, val_stats = sd.trajectory_examples(
            tokenizer, val_t, max_seq_len=max_seq_len, eos_ids=eos, keep_prompt=True
        )
        info = {
            "format": RLM_TRAJECTORIES,
            "regime": cfg.regime,
            "min_score": cfg.min_score,
            "max_seq_len": max_seq_len,
            "results": [sd.results_fingerprint(Path(d)) for d in cfg.data],
            "selection": selection,
            "train_rows": sorted({e.row_id for e in train}),
            "val_rows": sorted({e.row_id for e in val}),
        }
    info.update(train=train_stats.to_dict(), val=val_stats.to_dict())
    return train, val, info


def _default_data(cfg: SFTConfig) -> str:
    return DEFAULT_DATA if cfg.family == ANOMALYXL else str(get_taskset(cfg.family).default_root())


def select_trajectories(cfg: SFTConfig) -> tuple[list, list, dict]:
    """(train, val) episodes and the selection counts; no model needed, so bad data fails fast."""
    regimes = None if cfg.regime is None else ("precise", "coarse") if cfg.regime == "both" else (cfg.regime,)
    trajectories, selection = sd.load_trajectories(
        cfg.data, min_score=cfg.min_score, regimes=regimes, include_test_split=cfg.include_test_split
    )
    if not trajectories:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(selection["skipped"].items())) or "no rows"
        hint = (
            " (SFT on test rows contaminates the benchmark: run tsbench eval with --split train)"
            if selection["skipped"].get("test_split")
            else ""
        )
        raise UserError(f"no usable RLM transcripts in {', '.join(cfg.data)} ({skipped}){hint}")
    train, val = sd.split_trajectories(trajectories, val_rows=cfg.val_rows, seed=cfg.seed)
    return (train[: cfg.train_rows] if cfg.train_rows is not None else train), val, selection


def as_dataset(examples: list[sd.Example]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "input_ids": [e.input_ids.tolist() for e in examples],
            "assistant_masks": [(e.labels != sd.IGNORE).astype(int).tolist() for e in examples],
        }
    )


# -- validation ---------------------------------------------------------------------------------
class Validation(TrainerCallback):
    """After TRL's evaluation (the val loss): the primary metric from greedy replies scored by the
    family, early stopping on the loss, one row per epoch."""

    def __init__(self, examples: list[sd.Example], tokenizer: Any, cfg: SFTConfig, emit: Callable):
        from tsbench.train.agent import ChatTokens

        self.examples = examples
        self.chat = ChatTokens(tokenizer)
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.emit = emit
        self.taskset = get_taskset(cfg.family)
        self.best_loss, self.bad_epochs = math.inf, 0
        self.epochs: list[dict] = []
        self.started = time.perf_counter()

    def primary(self, model: Any) -> dict:
        from tsbench.train.agent import HFBackend, Request

        backend = HFBackend(model, self.tokenizer)
        scores, valid, by_category = [], [], {}
        was_training = model.training
        model.eval()
        try:
            for e in self.examples:
                ids = self.chat.first_prompt(e.prompt)
                reply = backend.generate([Request(ids, self.cfg.val_max_new_tokens, 0.0, 0)])[0]
                scored = self.taskset.score(e.category, e.gold, self.chat.decode(reply.ids))
                scores.append(scored.score)
                valid.append(scored.valid)
                by_category.setdefault(e.category, []).append(scored.score)
                self.emit("val_row", score=scored.score)
        finally:
            model.train(was_training)
        return {
            "eval_primary": float(np.mean(scores)),
            "eval_valid": float(np.mean(valid)),
            "eval_by_category": json.dumps({c: float(np.mean(v)) for c, v in by_category.items()}, sort_keys=True),
        }

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict | None = None, model: Any = None, **_: Any
    ) -> None:
        if metrics is None or model is None:
            return
        extra = self.primary(model)
        metrics["eval_primary"] = extra["eval_primary"]  # read by load_best_model_at_end
        loss = float(metrics.get("eval_loss", math.nan))
        if loss < self.best_loss:
            self.best_loss, self.bad_epochs = loss, 0
        else:
            self.bad_epochs += 1
        stop = self.bad_epochs >= self.cfg.patience
        control.should_training_stop = control.should_training_stop or stop
        epoch = int(round(state.epoch or 0))
        losses = [h["loss"] for h in state.log_history if "loss" in h and math.ceil(h.get("epoch", 0) - 1e-9) == epoch]
        self.epochs.append(
            {
                "epoch": epoch,
                "train_loss": float(np.mean(losses)) if losses else math.nan,
                "val_loss": loss,
                "val_primary": extra["eval_primary"],
                "val_valid": extra["eval_valid"],
                "val_by_category": extra["eval_by_category"],
                "val_rows": len(self.examples),
                "step": int(state.global_step),
                "seconds": time.perf_counter() - self.started,
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
    import torch
    from trl import SFTConfig as TRLConfig
    from trl import SFTTrainer

    from tsbench.train.agent import eos_token_ids
    from tsbench.train.policy import load_policy, name_base

    def emit(event: str, **values: Any) -> None:
        if progress is not None:
            progress(event, values)

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    cfg = checked(cfg)
    if cfg.format == TIMEMASTER_TRACES:  # its own data and trainer call (a VLM's images): train/sft_timemaster.py
        from tsbench.train.sft_timemaster import run_trace_sft

        return run_trace_sft(cfg, progress)
    selected = None  # bad data fails before a model loads
    if cfg.format == SINGLE_PASS:
        sd.split_files(get_taskset(cfg.family), cfg.data[0] if cfg.data else _default_data(cfg))
    else:
        selected = select_trajectories(cfg)
    out = prepare_out(cfg)
    started = time.perf_counter()
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        limit_malloc_arenas()  # a lower CPU peak (train/cpu_memory.py)
    emit("load_start", model=cfg.policy.model)
    torch.manual_seed(cfg.seed)
    policy = load_policy(cfg.policy, out, on_gpu=on_gpu)
    if not getattr(policy.tokenizer, "chat_template", None):
        raise UserError(f"{cfg.policy.model} has no chat template; SFT formats conversations with it")
    context = getattr(policy.model.config, "max_position_embeddings", None)
    max_seq_len = cfg.max_seq_len or context or 4096
    if context is not None and max_seq_len > context:
        raise UserError(f"--max-seq-len {max_seq_len} exceeds the {context}-token context of {cfg.policy.model}")
    eos = eos_token_ids(policy.tokenizer, policy.model)
    emit("data_start")
    train, val, data_info = build_data(cfg, policy.tokenizer, eos, max_seq_len, selected)
    if not train:
        raise UserError(
            f"no training examples fit max_seq_len={max_seq_len} "
            f"(skipped: {data_info['train']['skipped']}); raise --max-seq-len or lower the text budget"
        )

    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    validation = Validation(val, policy.tokenizer, cfg, emit)
    args = TRLConfig(
        output_dir=str(out / CHECKPOINTS),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=1,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip if cfg.grad_clip > 0 else 1e9,
        lr_scheduler_type="linear",
        warmup_steps=warmup_steps(cfg.warmup, total),
        seed=cfg.seed,
        data_seed=cfg.seed,
        eval_strategy="epoch" if val else "no",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=bool(val),
        metric_for_best_model="eval_primary" if val else None,
        greater_is_better=True,
        max_length=None,
        packing=False,
        completion_only_loss=False,
        gradient_checkpointing=cfg.gradient_checkpointing,
        bf16=on_gpu,
        fp16=False,
        use_cpu=not on_gpu,
        logging_steps=1,
        report_to=check_targets(cfg.report_to),
        disable_tqdm=True,
        dataset_num_proc=None,
        eos_token=None,
    )
    manifest = {
        "kind": "sft-baseline",
        "config": asdict(cfg),
        "data": data_info,
        "model": {
            "spec": cfg.policy.model,
            "base_model_name_or_path": policy.base_record,
            "warm_start": policy.warm_start,
            "lora": cfg.policy.lora,
            "context": context,
        },
        "optimizer": {
            "steps_per_epoch": steps_per_epoch,
            "total_steps": total,
            "warmup_steps": warmup_steps(cfg.warmup, total),
            "schedule": "linear warmup, linear decay",
        },
        "eval_hint": {
            "model": f"local/{out}",
            "harness": SINGLE_PASS if cfg.format == SINGLE_PASS else "rlm",
            **(
                {"text_budget_chars": data_info["text_budget_chars"], "regime": cfg.regime}
                if cfg.format == SINGLE_PASS
                else {}
            ),
        },
        "versions": versions((*TRACKED_PACKAGES, "peft", "trl")),
        "git_commit": git_commit(),
        "created_at": _now(),
        "complete": False,
    }
    write_json(out / RUN_JSON, manifest)
    from transformers import PrinterCallback

    with tracking(cfg.report_to, out):
        trainer = SFTTrainer(
            model=policy.model,
            args=args,
            train_dataset=as_dataset(train),
            eval_dataset=as_dataset(val) if val else None,
            processing_class=policy.tokenizer,
            peft_config=policy.peft_config,
            callbacks=[validation, StepEvents(emit)],
        )
        trainer.remove_callback(PrinterCallback)
        n_train = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        n_all = sum(p.numel() for p in trainer.model.parameters())
        trainer.train()
    trainer.save_model(str(out))  # the best epoch when there is validation data, else the last
    name_base(out, policy.base_record)
    shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
    for name in ("training_args.bin", "README.md"):
        (out / name).unlink(missing_ok=True)

    import pandas as pd

    epochs = validation.epochs or [
        {
            "epoch": cfg.epochs,
            "train_loss": math.nan,
            "val_loss": math.nan,
            "val_primary": math.nan,
            "step": trainer.state.global_step,
        }
    ]
    best = max(validation.epochs, key=lambda r: (r["val_primary"], -r["val_loss"])) if validation.epochs else None
    for row in epochs:
        row["saved"] = best is None or row is best
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
    manifest["model"].update(trainable_params=n_train, total_params=n_all)
    manifest.update(
        complete=True,
        updated_at=_now(),
        seconds=time.perf_counter() - started,
        epochs_run=len(validation.epochs) or cfg.epochs,
        best_epoch=best["epoch"] if best else cfg.epochs,
        best_val_primary=best["val_primary"] if best else None,
        stopped_early=len(validation.epochs) < cfg.epochs and bool(validation.epochs),
    )
    write_json(out / RUN_JSON, manifest)
    emit("done", out=str(out), best_epoch=manifest["best_epoch"])
    return out


class RichSFTProgress:
    """Rich output for run_sft: `with RichSFTProgress(console) as p: run_sft(cfg, p)`."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self.console = console or Console(stderr=True)

    def __enter__(self) -> RichSFTProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

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
