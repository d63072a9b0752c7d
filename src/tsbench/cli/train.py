"""`sft-baseline` and `train-grpo`: supervised baselines and GRPO post-training (both on TRL).

Settings come from a TOML (--config, the [sft] / [grpo] table) with the flags the user typed on
top; printed defaults are the dataclasses' (tsbench/train/config.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tsbench.cli.common import console, err_console, split_list
from tsbench.cli.options import given_settings, harness_arg_option, harness_flags, settings_options
from tsbench.core.config import build, read_toml_table
from tsbench.core.errors import UserError
from tsbench.core.extras import check
from tsbench.core.out_paths import writable_folder
from tsbench.core.own_folder import config_overwrite_refusal
from tsbench.core.settings import convert, spec_map
from tsbench.eval.model_args import harness_args
from tsbench.harness.settings import build_run
from tsbench.train.config import GRPOConfig, LaunchConfig
from tsbench.train.launch import launch_command, needs_launcher
from tsbench.train.sft_config import TSLM_PREFIX, SFTConfig

LAUNCHED = "TSBENCH_LAUNCHED"  # set in the processes `accelerate launch` starts, so they do not relaunch


TRAIN_PACKAGES = ("torch", "transformers", "peft", "accelerate", "trl")


@settings_options(SFTConfig)
def sft_baseline(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(
        None, help="A TOML file from experiments/sft/ ([sft] table); flags override it."
    ),
    full: bool = typer.Option(False, help="Full fine-tuning (the same as --lora 0)."),
    check_only: bool = typer.Option(
        False,
        "--check",
        help="Resolve the model's config and tokenizer, the data and the memory plan, print them and stop: no weights load.",
    ),
) -> None:
    """Supervised baselines, one trainer call for every kind: LoRA/full SFT of a language or vision-language model (--format single-pass-text, rlm-trajectories or timemaster-traces), a TSLM baseline (--model tslm/chatts, tslm/flamingo or tslm/itformer, sized by the [sft.tslm] flags), Toto-1.0-QA (--model toto/<checkpoint>), or the classical features + gradient-boosted heads (--model classical).

    Every setting is a flag of its field's name and a key of the [sft] table (src/tsbench/train/sft_config.py)."""
    flags = given_settings(ctx, SFTConfig)
    model, data, out = flags.get("model", ""), flags.get("data"), flags.get("out")
    data = split_list(data) if data else None
    seed = convert(spec_map(SFTConfig)["seed"], flags["seed"]) if "seed" in flags else 42
    if model == "classical":
        spec = spec_map(SFTConfig)
        _train_classical(
            Path(data[0]) if data else Path("data/anomalyxl") / "seed42",
            writable_folder(Path(out) if out else Path("models/classical"), "--out"),
            seed,
            workers=convert(spec["workers"], flags["workers"]) if "workers" in flags else 2,
            train_rows=convert(spec["train_rows"], flags["train_rows"]) if "train_rows" in flags else None,
        )
        return
    check(*TRAIN_PACKAGES, extra="train", what="sft-baseline of a language model")
    from tsbench.train.sft import RichSFTProgress, run_sft

    settings = read_toml_table(config, "sft") if config else {}
    out = flags.get("out") or settings.get("out") or "models"  # trained models live under models/
    if refused := config_overwrite_refusal(config, settings, flags, out, results="models"):
        raise UserError(refused)
    if full:
        flags["lora"] = 0
    settings.update(flags)
    if not settings.get("model") and not (settings.get("policy") or {}).get("model"):
        raise UserError("--model is required (or a --config that sets model)")
    cfg = build(SFTConfig, settings, where=f"setting in {config}" if config else "setting")
    if cfg.policy.model.startswith(TSLM_PREFIX):  # the TSLM baselines read the series through Chronos-2
        check("chronos", extra="tslm", what="a TSLM baseline")
    if check_only:
        from tsbench.train.check import check_sft

        console.print(check_sft(cfg, where=str(config) if config else None), markup=False, highlight=False)
        return
    writable_folder(Path(cfg.out or out), "--out")  # before any weights load
    path = run_sft(cfg, RichSFTProgress(err_console))
    hint = json.loads((path / "run.json").read_text())["eval_hint"]["model"]
    console.print(f"wrote {path}  (evaluate: tsbench eval --model {hint})")


def _train_classical(data_dir: Path, out: Path, seed: int, *, workers: int = 2, train_rows: int | None = None) -> None:
    from contextlib import nullcontext

    from tsbench.baselines.classical import train_classical

    if not data_dir.is_dir():
        raise UserError(f"no dataset at {data_dir} (create it with: tsbench generate --split all)")
    if err_console.is_terminal:
        bars = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console.real,
        )
        tasks: dict[str, int] = {}

        def progress(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bars.add_task(what, total=total)
            bars.update(tasks[what], completed=done, total=total)

        shown = bars
    else:  # a log file: a line per 5 % or per minute, with the ETA
        progress, shown = (
            LogProgress(lambda line: err_console.print(line, markup=False, highlight=False)),
            nullcontext(),
        )
    with shown:
        report = train_classical(data_dir, out, progress, seed=seed, workers=workers, train_rows=train_rows)
    console.print(report)
    console.print(f"wrote {out}  (evaluate: tsbench eval --model classical/{out})")


class LogProgress:
    """Progress as lines for a log (stderr not a terminal): each stage's share done, elapsed and ETA,
    a line per `step` of the total or per `every` seconds, and one at the end. The ETA assumes the
    rest goes at the rate so far, in the units the stage counts (features: channel-samples)."""

    def __init__(self, write, step: float = 0.05, every: float = 60.0, clock=None):
        import time

        self.write, self.step, self.every = write, step, every
        self.clock = clock or time.monotonic
        self.stages: dict[str, tuple[float, float, float]] = {}  # what -> (started, last share, last time)

    def __call__(self, what: str, done: int, total: int) -> None:
        now = self.clock()
        if what not in self.stages:
            self.stages[what] = (now, -1.0, now)
        started, shown, at = self.stages[what]
        share = 1.0 if not total else done / total
        if share < 1.0 and share - shown < self.step and now - at < self.every:
            return
        if shown >= 1.0:
            return
        elapsed = now - started
        eta = "?" if share <= 0 else _clock_text(elapsed * (1 - share) / share)
        self.write(f"{what}: {share:6.1%} done, {_clock_text(elapsed)} elapsed, ETA {eta}")
        self.stages[what] = (started, share, now)


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )


@settings_options(GRPOConfig)
def train_grpo_cmd(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(
        None, help="A TOML file from experiments/grpo/ ([grpo] table); flags override it."
    ),
    harness_arg: Optional[list[str]] = harness_arg_option("max_turns=3"),  # noqa: UP045 - typer needs a runtime type
    full: bool = typer.Option(False, help="Train every parameter (the same as --lora 0)."),
    check_only: bool = typer.Option(
        False,
        "--check",
        help="Resolve the model's config and tokenizer, the engine, harness, prompt budget and the memory plan per "
        "rank, print them and stop: no weights load.",
    ),
) -> None:
    """GRPO post-training on TRL with the family's training tasks (AnomalyXL: fresh generator tasks every step), episodes in our harness.

    Every setting is a flag of its field's name and a key of the [grpo] table (src/tsbench/train/config.py)."""
    settings = read_toml_table(config, "grpo") if config else {}
    settings.update(harness_args(harness_arg))
    flags = {**given_settings(ctx, GRPOConfig), **harness_flags(ctx)}
    if full:
        flags["lora"] = 0
    settings.update(flags)
    if not settings.get("model") and not (settings.get("policy") or {}).get("model"):
        raise UserError("--model is required (or a --config that sets model)")
    cfg = build_run(GRPOConfig, settings, where=f"setting in {config}" if config else "setting")
    cfg.validate(cfg.launch.num_processes)
    if check_only:
        from tsbench.train.check import check_grpo

        console.print(check_grpo(cfg, where=str(config) if config else None), markup=False, highlight=False)
        return
    writable_folder(cfg.run_dir(), "--out")  # before a launcher starts ranks or weights load
    if needs_launcher(cfg.launch) and not os.environ.get(LAUNCHED):
        raise typer.Exit(relaunch(cfg.launch))

    check(*TRAIN_PACKAGES, extra="train", what="train-grpo")
    from tsbench.train.grpo import LineProgress, train_grpo

    run_dir = train_grpo(cfg, LineProgress(err_console))
    console.print(f"wrote {run_dir}  (evaluate: tsbench eval --model local/{run_dir}/final)")


train_grpo_cmd.plays_harness = True  # the chosen harness's own settings are its options (cli/options.py)


def relaunch(launch: LaunchConfig) -> int:
    command = launch_command(launch, sys.argv[1:])
    err_console.print(f"launching {launch.num_processes} process(es): {' '.join(command)}", markup=False)
    return subprocess.run(command, env={**os.environ, LAUNCHED: "1"}).returncode
