"""`sft-baseline` and `train-grpo`: supervised baselines and GRPO post-training (both on TRL).

Settings come from a TOML (--config, the [sft] / [grpo] table) with the flags the user typed on
top; printed defaults are the dataclasses' (tsbench/train/config.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tsbench.cli.common import REPORT_TO_HELP, console, err_console, given, ints, split_list
from tsbench.core.config import build, field_names, read_toml_table
from tsbench.core.errors import UserError
from tsbench.core.extras import check
from tsbench.train.config import (CURRICULUM_FRACTION, GRPOConfig, LaunchConfig, PolicyConfig, RewardConfig,
                                  RolloutConfig, SFTConfig, TaskConfig)

G, P, R, T, RO, L, S = GRPOConfig(), PolicyConfig(), RewardConfig(), TaskConfig(), RolloutConfig(), LaunchConfig(), SFTConfig()
SP, HC = S.policy, G.harness_config
LAUNCHED = "TSBENCH_LAUNCHED"  # set in the processes `accelerate launch` starts, so they do not relaunch


TRAIN_PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl")

def sft_baseline(
    ctx: typer.Context,
    model: str = typer.Option("", show_default=False, help="classical (features + XGBoost heads), or an LM: local/smollm2-135m, local/<dir>, a path or an HF id."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/sft/ ([sft] table); flags override it."),
    format: str = typer.Option(S.format, "--format", help="LMs: single-pass-text or rlm-trajectories."),
    data: Optional[list[Path]] = typer.Option(None, help="single-pass-text/classical: dataset seed dir; rlm-trajectories: results/<run> dir(s)."),
    seed: int = typer.Option(S.seed, help="LoRA init, shuffling and held-out trajectories (classical: the dataset seed 42 dir)."),
    regime: Optional[str] = typer.Option(None, help="precise or coarse (rlm-trajectories also: both) [precise | both]."),
    lora: int = typer.Option(SP.lora, help="LoRA rank (0: train every parameter)."),
    full: bool = typer.Option(False, help="Full fine-tuning (the same as --lora 0)."),
    lora_alpha: Optional[int] = typer.Option(SP.lora_alpha, help="LoRA alpha."),
    lora_dropout: float = typer.Option(SP.lora_dropout, help="LoRA dropout."),
    lora_target: str = typer.Option(SP.lora_target, help="LoRA target modules (comma-separated, or all-linear)."),
    epochs: int = typer.Option(S.epochs, help="Epochs."),
    lr: float = typer.Option(S.lr, help="Learning rate."),
    weight_decay: float = typer.Option(S.weight_decay, help="AdamW weight decay."),
    grad_clip: float = typer.Option(S.grad_clip, help="Max gradient norm (0: no clipping)."),
    warmup: float = typer.Option(S.warmup, help="Warmup: this fraction of the steps, rounded down."),
    batch_size: int = typer.Option(S.batch_size, help="Batch size."),
    patience: int = typer.Option(S.patience, help="Early stopping patience on val loss."),
    val_rows: int = typer.Option(S.val_rows, help="Validation rows."),
    train_rows: Optional[int] = typer.Option(None, help="Training rows [all]."),
    min_score: float = typer.Option(S.min_score, help="rlm-trajectories: keep episodes scoring at least this."),
    include_test_split: bool = typer.Option(False, help="rlm-trajectories: allow transcripts of test rows (contaminates the benchmark)."),
    max_seq_len: Optional[int] = typer.Option(None, help="Longest example in tokens [the model's context]."),
    text_budget_chars: Optional[int] = typer.Option(None, help="single-pass-text: serialized characters [fitted to max_seq_len]."),
    out: Optional[Path] = typer.Option(None, help="Output dir [models/<name>]."),
    report_to: Optional[list[str]] = typer.Option(None, help=REPORT_TO_HELP),
    overwrite: bool = typer.Option(False, help="Replace an existing output dir."),
) -> None:
    """Supervised baselines: the classical features + gradient-boosted heads, or LoRA/full SFT of a language model."""
    if model == "classical":
        _train_classical(data[0] if data else Path("data/anomalyxl") / "seed42", out or Path("models/classical"),
                         seed if "seed" in given(ctx) else 42)
        return
    check(*TRAIN_PACKAGES, extra="train", what="sft-baseline of a language model")
    from tsbench.train.sft import RichSFTProgress, run_sft

    settings = read_toml_table(config, "sft") if config else {}
    flags = given(ctx, field_names(SFTConfig))
    if full:
        flags["lora"] = 0
    if "data" in flags:
        flags["data"] = [str(d) for d in flags["data"]]
    if "report_to" in flags:
        flags["report_to"] = split_list(flags["report_to"])
    if "out" in flags:
        flags["out"] = str(flags["out"])
    settings.update(flags)
    if not settings.get("model"):
        raise UserError("--model is required (or a --config that sets model)")
    cfg = build(SFTConfig, settings, where=f"setting in {config}" if config else "setting")
    with RichSFTProgress(err_console) as progress:
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
    ctx: typer.Context,
    model: str = typer.Option("", show_default=False, help="Policy: local/smollm2-135m, local/<dir> (e.g. an sft-baseline adapter: the warm start), an HF id or a path."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/grpo/ ([grpo] table); flags override it."),
    lora: int = typer.Option(P.lora, help="Train a LoRA adapter of this rank (0: every parameter, the paper's run)."),
    full: bool = typer.Option(False, help="Train every parameter (the same as --lora 0)."),
    lora_alpha: Optional[int] = typer.Option(None, help="LoRA alpha [2 x rank]."),
    lora_target: str = typer.Option(P.lora_target, help="LoRA target modules (comma-separated, or all-linear)."),
    steps: int = typer.Option(G.steps, help="Optimizer steps."),
    group_size: int = typer.Option(G.group_size, help="Rollouts per task, G."),
    batch_size: int = typer.Option(G.batch_size, help="Rollouts per step; tasks per step = batch / G."),
    micro_batch_size: int = typer.Option(G.micro_batch_size, help="Sequences per forward/backward on one process."),
    max_seq_len: int = typer.Option(G.max_seq_len, help="Tokens per episode (first prompt + every turn)."),
    lr: float = typer.Option(G.lr, help="Learning rate."),
    warmup_steps: int = typer.Option(G.warmup_steps, help="Linear warmup steps (then constant)."),
    loss: str = typer.Option(G.loss, help="TRL loss_type: dr_grpo (the paper) or grpo (TimeMaster)."),
    beta: float = typer.Option(G.beta, help="KL weight to the reference (= the starting policy, the warm start if any); TimeMaster 0.001."),
    epsilon: float = typer.Option(G.epsilon, help="PPO clip epsilon."),
    harness: str = typer.Option(G.harness, help="The harness episodes run in (rlm, single-pass-text, tools, ...)."),
    max_turns: int = typer.Option(HC.max_turns, help="Replies per episode."),
    max_tokens: int = typer.Option(HC.max_tokens, help="Tokens per reply."),
    temperature: float = typer.Option(HC.temperature, help="Sampling temperature (the loss scores at the same one)."),
    reward: str = typer.Option(R.reward, help="anomalyxl (penalised score, the paper) or composite (TimeMaster)."),
    lambda_tok: float = typer.Option(R.lambda_tok, help="anomalyxl: token-cost weight (applies when s > 0)."),
    lambda_fail: float = typer.Option(R.lambda_fail, help="anomalyxl: forced-final penalty."),
    format_weight: float = typer.Option(R.format_weight, help="composite: weight of the format reward."),
    hard_weight: float = typer.Option(R.hard_weight, help="composite: weight of the hard (class) reward."),
    soft_weight: Optional[float] = typer.Option(None, help="composite: weight of the judge's soft reward [1 with --judge, else 0]."),
    judge: Optional[str] = typer.Option(None, help="composite: the soft reward's LLM judge, provider/name."),
    judge_base_url: Optional[str] = typer.Option(None, help="composite: an OpenAI-compatible server for the judge."),
    categories: Optional[list[str]] = typer.Option(None, help="Task categories (comma-separated) [the five precise ones]."),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths (comma-separated) [the preset's grid]."),
    preset: str = typer.Option(T.preset, help="Generator grid: paper or small."),
    warm_steps: Optional[int] = typer.Option(None, help=f"Steps without anomaly-free tasks [{CURRICULUM_FRACTION * G.steps:.0f} of {G.steps} steps, scaled with --steps]."),
    engine: str = typer.Option(RO.engine, help="Rollouts: hf (the training model), vllm-colocate or vllm-server (GPU)."),
    vllm_server_url: str = typer.Option(RO.vllm_server_url, help="vllm-server: the `trl vllm-serve` URL."),
    rollout_workers: int = typer.Option(RO.rollout_workers, help="Episodes in flight per process."),
    unsafe_sandbox: bool = typer.Option(False, help="Run kernels WITHOUT the bubblewrap jail."),
    num_processes: int = typer.Option(L.num_processes, help="Processes (GPUs): more than 1 relaunches under accelerate."),
    accelerate_config: Optional[Path] = typer.Option(None, help="An accelerate YAML (experiments/grpo/accelerate/)."),
    seed: int = typer.Option(G.seed, help="Seed for tasks, sampling and init."),
    save_every: int = typer.Option(G.save_every, help="Checkpoint every N steps."),
    out: Optional[Path] = typer.Option(None, help="Run dir [runs/grpo__<model>]."),
    resume: bool = typer.Option(False, help="Continue a run from its last checkpoint (same settings)."),
    report_to: Optional[list[str]] = typer.Option(None, help=REPORT_TO_HELP),
) -> None:
    """GRPO post-training on TRL with fresh generator tasks every step, episodes in our harness."""
    settings = read_toml_table(config, "grpo") if config else {}
    flags = given(ctx, field_names(GRPOConfig))
    if full:
        flags["lora"] = 0
    for name in ("categories", "report_to"):
        if name in flags:
            flags[name] = split_list(flags[name])
    if "lengths" in flags:
        flags["lengths"] = ints(flags["lengths"], "--lengths")
    for name in ("out", "accelerate_config"):
        if name in flags:
            flags[name] = str(flags[name])
    settings.update(flags)
    if not settings.get("model"):
        raise UserError("--model is required (or a --config that sets model)")
    cfg = build(GRPOConfig, settings, where=f"setting in {config}" if config else "setting")
    cfg.validate(cfg.launch.num_processes)
    if (cfg.launch.num_processes > 1 or cfg.launch.accelerate_config) and not os.environ.get(LAUNCHED):
        raise typer.Exit(relaunch(cfg.launch))

    check(*TRAIN_PACKAGES, extra="train", what="train-grpo")
    from tsbench.train.grpo import LineProgress, train_grpo

    run_dir = train_grpo(cfg, LineProgress(err_console))
    console.print(f"wrote {run_dir}  (evaluate: tsbench eval --model local/{run_dir}/final)")


def launch_command(launch: LaunchConfig, argv: list[str]) -> list[str]:
    """`accelerate launch` running this same tsbench command in every process."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(launch.num_processes)]
    if launch.accelerate_config:
        if not Path(launch.accelerate_config).is_file():
            raise UserError(f"no such accelerate config: {launch.accelerate_config}")
        command += ["--config_file", launch.accelerate_config]
    return command + ["-m", "tsbench.cli", *argv]


def relaunch(launch: LaunchConfig) -> int:
    command = launch_command(launch, sys.argv[1:])
    err_console.print(f"launching {launch.num_processes} process(es): {' '.join(command)}", markup=False)
    return subprocess.run(command, env={**os.environ, LAUNCHED: "1"}).returncode
