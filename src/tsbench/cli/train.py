"""`sft-baseline` and `train-grpo`: supervised baselines and GRPO post-training."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tsbench.cli.common import console, err_console, ints, split_list
from tsbench.core.errors import UserError
from tsbench.core.extras import check

TRAIN_PACKAGES = ("torch", "transformers", "peft", "accelerate")


def sft_baseline(
    model: str = typer.Option(..., help="classical (features + XGBoost heads), or an LM: local/smollm2-135m, local/<dir>, a path or an HF id."),
    format: Optional[str] = typer.Option(None, "--format", help="LMs: single-pass-text or rlm-trajectories [single-pass-text]."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/sft/ ([sft] table); flags override it."),
    data: Optional[list[Path]] = typer.Option(None, help="single-pass-text/classical: dataset seed dir; rlm-trajectories: results/<run> dir(s)."),
    seed: int = typer.Option(42, help="Dataset seed when --data is not given (data/anomalyxl/seed<seed>)."),
    regime: Optional[str] = typer.Option(None, help="precise or coarse (rlm-trajectories also: both)."),
    lora_r: Optional[int] = typer.Option(None, help="LoRA rank [16]."),
    lora_alpha: Optional[int] = typer.Option(None, help="LoRA alpha [32]."),
    lora_dropout: Optional[float] = typer.Option(None, help="LoRA dropout [0.05]."),
    target: Optional[str] = typer.Option(None, help="LoRA target modules [q_proj,v_proj]."),
    full: bool = typer.Option(False, help="Full fine-tuning instead of LoRA."),
    epochs: Optional[int] = typer.Option(None, help="Epochs [5]."),
    lr: Optional[float] = typer.Option(None, help="Learning rate [1e-4]."),
    weight_decay: Optional[float] = typer.Option(None, help="AdamW weight decay [0.01]."),
    grad_clip: Optional[float] = typer.Option(None, help="Max gradient norm [1.0]."),
    warmup: Optional[float] = typer.Option(None, help="Warmup fraction of steps [0.03]."),
    batch_size: Optional[int] = typer.Option(None, help="Batch size [1]."),
    patience: Optional[int] = typer.Option(None, help="Early stopping patience on val loss [3]."),
    val_rows: Optional[int] = typer.Option(None, help="Validation rows [500]."),
    train_rows: Optional[int] = typer.Option(None, help="Training rows [all]."),
    min_score: Optional[float] = typer.Option(None, help="rlm-trajectories: keep episodes scoring at least this [0.5]."),
    include_test_split: bool = typer.Option(False, help="rlm-trajectories: allow transcripts of test rows (contaminates the benchmark)."),
    max_seq_len: Optional[int] = typer.Option(None, help="Longest example in tokens [the model's context]."),
    text_budget_chars: Optional[int] = typer.Option(None, help="single-pass-text: serialized characters [fitted to max_seq_len]."),
    out: Optional[Path] = typer.Option(None, help="Output dir [models/<name>]."),
    overwrite: bool = typer.Option(False, help="Replace an existing output dir."),
) -> None:
    """Supervised baselines: the classical features + gradient-boosted heads, or LoRA/full SFT of a language model."""
    if model == "classical":
        _train_classical(data[0] if data else Path("data/anomalyxl") / f"seed{seed}", out or Path("models/classical"), seed)
        return
    check(*TRAIN_PACKAGES, extra="train", what="sft-baseline of a language model")
    from tsbench.train.sft import RichSFTProgress, SFTConfig, load_sft_config, run_sft

    flags = {
        "model": model, "format": format, "data": [str(d) for d in data] if data else None, "regime": regime,
        "lora_r": lora_r, "lora_alpha": lora_alpha, "lora_dropout": lora_dropout, "target": target,
        "full": full or None, "epochs": epochs, "lr": lr, "weight_decay": weight_decay, "grad_clip": grad_clip,
        "warmup": warmup, "batch_size": batch_size, "patience": patience, "val_rows": val_rows,
        "train_rows": train_rows, "min_score": min_score, "include_test_split": include_test_split or None,
        "max_seq_len": max_seq_len, "text_budget_chars": text_budget_chars, "out": str(out) if out else None,
        "overwrite": overwrite or None,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    try:
        cfg = load_sft_config(config, **given) if config else SFTConfig(**given)
    except (TypeError, FileNotFoundError) as exc:
        raise UserError(f"bad SFT settings: {exc}") from None
    with RichSFTProgress(console=err_console) as progress:
        path = run_sft(cfg, progress)
    console.print(f"wrote {path}  (evaluate: tsbench eval --model local/{path})")


def _train_classical(data_dir: Path, out: Path, seed: int) -> None:
    from tsbench.baselines.classical import train_classical

    if not data_dir.is_dir():
        raise UserError(f"no dataset at {data_dir} (create it with: tsbench generate --split all)")
    bars = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=err_console)
    tasks: dict[str, int] = {}

    def progress(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bars.add_task(what, total=total)
        bars.update(tasks[what], completed=done, total=total)

    with bars:
        report = train_classical(data_dir, out, progress, seed=seed)
    console.print(report)
    console.print(f"wrote {out}  (evaluate: tsbench eval --model classical/{out})")


def train_grpo_cmd(
    model: Optional[str] = typer.Option(None, help="Policy: local/smollm2-135m, local/<dir> (e.g. an sft-baseline output), an HF id or a path."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/grpo/; flags override it."),
    lora: Optional[int] = typer.Option(None, help="Train a LoRA adapter of this rank."),
    full: bool = typer.Option(False, help="Train all parameters (the paper's run)."),
    steps: Optional[int] = typer.Option(None, help="Optimizer steps [300]."),
    group_size: Optional[int] = typer.Option(None, help="Rollouts per task, G [8]."),
    batch_size: Optional[int] = typer.Option(None, help="Rollouts per step [128]; tasks per step = batch / G."),
    max_turns: Optional[int] = typer.Option(None, help="Replies per episode [15]."),
    max_seq_len: Optional[int] = typer.Option(None, help="Tokens per episode [65536]."),
    max_new_tokens: Optional[int] = typer.Option(None, help="Tokens per reply [4096]."),
    lr: Optional[float] = typer.Option(None, help="Learning rate [1e-6]."),
    advantage: Optional[str] = typer.Option(None, help="dr-grpo (paper) or grpo (TimeMaster) [dr-grpo]."),
    kl_beta: Optional[float] = typer.Option(None, help="KL weight to the frozen reference [0; TimeMaster 0.001]."),
    reward: Optional[str] = typer.Option(None, help="anomalyxl (penalised score) or composite (TimeMaster) [anomalyxl]."),
    judge: Optional[str] = typer.Option(None, help="composite: the LLM judge's provider/name."),
    categories: Optional[list[str]] = typer.Option(None, help="Task categories (comma-separated) [the five precise ones]."),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths (comma-separated) [the preset's grid]."),
    preset: Optional[str] = typer.Option(None, help="Task grid: paper or small [paper]."),
    rollout_engine: Optional[str] = typer.Option(None, help="hf (transformers) or vllm (GPU) [hf]."),
    seed: Optional[int] = typer.Option(None, help="Seed for tasks, sampling and init."),
    out: Optional[Path] = typer.Option(None, help="Run dir [runs/grpo__<model>]."),
    resume: bool = typer.Option(False, help="Continue a run from its last checkpoint (model, optimizer, scheduler, RNG, step)."),
) -> None:
    """GRPO post-training of an RLM agent with fresh generator tasks every step."""
    check(*TRAIN_PACKAGES, extra="train", what="train-grpo")
    from tsbench.train import RichProgress, load_grpo_config, train_grpo
    from tsbench.train.grpo import config_from_dict

    flags = {
        "model": model, "lora": lora, "full": True if full else None, "steps": steps, "group_size": group_size,
        "batch_size": batch_size, "max_turns": max_turns, "max_seq_len": max_seq_len, "max_new_tokens": max_new_tokens,
        "lr": lr, "advantage": advantage, "kl_beta": kl_beta, "reward": reward, "judge": judge,
        "categories": tuple(c) if (c := split_list(categories)) else None,
        "lengths": tuple(n) if (n := ints(lengths, "--lengths")) else None,
        "preset": preset, "rollout_engine": rollout_engine, "seed": seed, "out": str(out) if out else None,
        "resume": True if resume else None,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if config is not None:
        cfg = load_grpo_config(config, **given)
    else:
        if "model" not in given:
            raise UserError("--model is required (or a --config that sets model)")
        cfg = config_from_dict(given, where="flags")
    with RichProgress(err_console) as progress:
        run_dir = train_grpo(cfg, progress)
    console.print(f"wrote {run_dir}  (evaluate: tsbench eval --model local/{run_dir}/final)")


