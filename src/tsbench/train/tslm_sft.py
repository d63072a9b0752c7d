"""`tsbench sft-baseline --model tslm/<arch>`: supervised fine-tuning of a TSLM baseline (Appendix C).

Rows come from the family's train split through the TaskFamily hooks (any family with one; for
AnomalyXL one regime per run, as the paper's per-regime variants): the `series` harness's own
prompt plus the series itself, answered with the family's `sft_target`. Only the answer tokens are
trained; the LoRA (the paper's: rank 16, alpha 32, dropout 0.05, q_proj and v_proj, from
`policy`) and the fusion module train, the encoder is frozen. A plain loop (batch size 1, the
paper's): AdamW, gradient clipping, linear warmup then decay. After each epoch, the validation
loss (early stopping watches it, `patience`) and the validation primary metric (greedy answers
scored by the family); the epoch with the highest metric is kept. The run dir loads as
`tslm/<dir>`; beside it run.json (with the validation loss before training), metrics.parquet (per
epoch) and steps.parquet (per step). `--model toto/<checkpoint>` runs the same loop on Toto-1.0-QA
(models/tslm/toto_checkpoint.py): only its text decoder's LoRA trains, each row carries its plot.
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tsbench.core.errors import UserError
from tsbench.core.provenance import TRACKED_PACKAGES, git_commit, versions, write_json
from tsbench.harness.series import series_messages
from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.build import LoraSpec, build_tslm, save_run
from tsbench.models.tslm.settings import ARCHITECTURES
from tsbench.tasks import get_taskset
from tsbench.train import sft_data as sd
from tsbench.train.sft import ProgressFn
from tsbench.train.sft_config import SFTConfig, checked, warmup_steps

PREFIX = "tslm/"
TOTO_PREFIX = "toto/"


@dataclass
class SeriesExample:
    prompt: Any  # what the model reads: the rendered chat text, one marker per channel (toto: the messages)
    series: torch.Tensor  # (channels, L)
    answer_ids: list[int]
    row_id: str
    category: str
    gold: Any


def architecture(cfg: SFTConfig) -> str:
    if cfg.policy.model.startswith(TOTO_PREFIX):  # toto/<checkpoint>: a LoRA on Toto-1.0-QA's text decoder
        return "toto"
    arch = cfg.policy.model.removeprefix(PREFIX).strip("/")
    if arch not in ARCHITECTURES:
        raise UserError(f"--model tslm/<arch> takes one of {', '.join(ARCHITECTURES)} (got {cfg.policy.model})")
    return arch


def tslm_checked(cfg: SFTConfig) -> SFTConfig:
    given_out = cfg.out
    cfg = checked(cfg)
    if given_out is None:
        cfg.out = str(Path("models") / f"tslm-{architecture(cfg)}-{cfg.regime or get_taskset(cfg.family).name}")
    architecture(cfg)
    problems = cfg.tslm.problems()
    if cfg.format != "single-pass-text":
        problems.append("a TSLM trains on rows (the default format), not on rlm-trajectories")
    if not cfg.policy.lora:
        problems.append("a TSLM trains a LoRA on its backbone (--lora >= 1; the paper: 16)")
    if problems:
        raise UserError("; ".join(problems))
    return cfg


def lora_of(cfg: SFTConfig) -> LoraSpec:
    policy = cfg.policy
    targets = policy.targets()
    return LoraSpec(
        policy.lora,
        policy.lora_alpha or 2 * policy.lora,
        policy.lora_dropout,
        ("all-linear",) if targets == "all-linear" else tuple(targets),
    )


def examples(model, family, refs) -> tuple[list[SeriesExample], dict[str, int]]:
    """Rows as (prompt, series, answer) examples; rows without a series or a scoring target are skipped."""
    tokenizer = model.tokenizer
    built, skipped = [], {}
    for ref in refs:
        sample = family.load(ref)
        problem = sd.target_problem(family, sample)
        if problem is not None:
            skipped[problem] = skipped.get(problem, 0) + 1
            continue
        task = sample.task
        target = family.sft_target(task.category, sample.gold)
        answer = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        prompt = model.render_prompt(series_messages(task, with_plot=bool(getattr(model, "wants_plot", False))))
        built.append(
            SeriesExample(
                prompt,
                torch.tensor(np.asarray(task.values, dtype=np.float32)),
                answer,
                task.row_id,
                task.category,
                sample.gold,
            )
        )
    return built, skipped


def split_refs(cfg: SFTConfig, family) -> tuple[list, list, str]:
    data = (
        cfg.data[0] if cfg.data else ("data/anomalyxl/seed42" if cfg.family == "anomalyxl" else family.default_root())
    )
    files = sd.split_files(family, data)
    train = sd.balanced_refs(family, files["train"], cfg.train_rows, cfg.regime)
    val = sd.balanced_refs(family, files["val"], cfg.val_rows, cfg.regime) if files["val"] and cfg.val_rows else []
    if val or not cfg.val_rows:
        return train, val, "val"
    everything = sd.balanced_refs(family, files["train"], None, cfg.regime)  # no val split: hold out part of train
    order = np.random.default_rng(cfg.seed).permutation(len(everything))
    held = {everything[i].id for i in order[: min(cfg.val_rows, max(1, len(everything) // 10))]}
    train = sd.balanced_refs(family, files["train"], cfg.train_rows, cfg.regime, exclude=held)
    return train, [r for r in everything if r.id in held], "train"


def mean_loss(model, rows: list[SeriesExample]) -> float:
    model.eval()
    with torch.no_grad():
        losses = [float(model.loss(e.prompt, e.series, e.answer_ids)) for e in rows]
    return float(np.mean(losses)) if losses else float("nan")


def primary_metric(model, family, rows: list[SeriesExample], max_new_tokens: int) -> float:
    """Mean family score of greedy answers (the paper selects the checkpoint on this)."""
    if not rows:
        return float("nan")
    model.eval()
    scores = []
    for e in rows:
        ids, _ = model.generate(e.prompt, e.series, max_new_tokens)
        text = model.tokenizer.decode(ids, skip_special_tokens=True).strip()
        scores.append(family.score(e.category, e.gold, text).score)
    return float(np.mean(scores))


def save_trained(model, out: Path, lora: LoraSpec, extra: dict) -> None:
    if model.arch == "toto":
        from tsbench.models.tslm.toto_checkpoint import save_run as save_toto_run

        save_toto_run(model, out, lora, extra)
    else:
        save_run(model, out, lora, extra)


def run_tslm_sft(cfg: SFTConfig, progress: ProgressFn | None = None) -> Path:
    cfg = tslm_checked(cfg)
    emit = progress or (lambda event, values: None)
    arch = architecture(cfg)
    family = get_taskset(cfg.family)
    out = Path(cfg.out)
    if out.exists() and any(out.iterdir()):
        if not cfg.overwrite:
            raise UserError(f"{out} already holds files; use another --out, or --overwrite to replace it")
        shutil.rmtree(out)
    train_refs, val_refs, val_from = split_refs(cfg, family)
    emit("load_start", {"model": cfg.policy.model if arch == "toto" else f"{PREFIX}{arch} on {cfg.tslm.backbone}"})
    lora = lora_of(cfg)
    try:
        if arch == "toto":
            from tsbench.models.tslm.toto_checkpoint import build_for_sft

            model = build_for_sft(cfg.policy.model.removeprefix(TOTO_PREFIX), cfg.tslm, lora, seed=cfg.seed)
        else:
            model = build_tslm(arch, cfg.tslm, lora, seed=cfg.seed)
    except ModelUnavailableError as exc:
        raise UserError(str(exc)) from None
    train, skipped = examples(model, family, train_refs)
    val, _ = examples(model, family, val_refs)
    if not train:
        raise UserError(f"no {family.name} train row can be a TSLM example ({skipped or 'none selected'})")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    total = cfg.epochs * len(train)
    warm = warmup_steps(cfg.warmup, total)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm))
    )
    rng = np.random.default_rng(cfg.seed)
    metrics, best, best_loss, stale, step, best_epoch = [], (-math.inf, -math.inf), math.inf, 0, 0, 0
    started = time.perf_counter()
    val_loss_before = mean_loss(model, val)  # the untrained fusion and LoRA: what SFT starts from
    step_losses = []
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        losses = []
        for i in rng.permutation(len(train)):
            e = train[i]
            loss = model.loss(e.prompt, e.series, e.answer_ids)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            schedule.step()
            step += 1
            losses.append(loss.item())
            step_losses.append({"step": step, "epoch": epoch, "loss": losses[-1], "lr": schedule.get_last_lr()[0]})
            emit("step", {"step": step, "steps": total, "loss": losses[-1]})
        val_loss = mean_loss(model, val)
        val_primary = primary_metric(model, family, val, cfg.val_max_new_tokens)
        improved = val_loss < best_loss
        best_loss, stale = (val_loss, 0) if improved else (best_loss, stale + 1)
        stop = bool(val) and stale >= cfg.patience
        key = (val_primary if val_primary == val_primary else -math.inf, -val_loss)
        if not val or key > best:  # highest val metric, then lowest val loss; without val rows, the last epoch
            best, best_epoch = key, epoch
            save_trained(model, out, lora, {"best_epoch": epoch})
        metrics.append(
            {"epoch": epoch, "train_loss": float(np.mean(losses)), "val_loss": val_loss, "val_primary": val_primary}
        )
        emit("epoch_end", {**metrics[-1], "stop": stop})
        if stop:
            break
    pd.DataFrame(metrics).to_parquet(out / "metrics.parquet", index=False)
    pd.DataFrame(step_losses).to_parquet(out / "steps.parquet", index=False)
    write_json(
        out / "run.json",
        {
            "kind": "tslm-sft",
            "arch": arch,
            "family": family.name,
            "regime": cfg.regime,
            "config": asdict(cfg),
            "parameters": model.parameter_counts(),
            "rows": {"train": len(train), "val": len(val), "val_from": val_from, "skipped": skipped},
            "best_epoch": best_epoch,
            "val_loss_before": val_loss_before,
            "epochs_run": len(metrics),
            "wall_s": round(time.perf_counter() - started, 2),
            "git_commit": git_commit(),
            "versions": versions(TRACKED_PACKAGES),
        },
    )
    emit("done", {"best_epoch": best_epoch, "out": str(out)})
    return out
