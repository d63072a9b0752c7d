"""GRPO on CPU through TRL: one real step of experiments/grpo/cpu_smoke.toml (SmolLM2-135M, LoRA 8,
one task x G 8 rlm episodes of two short turns in the jail), run as users run it (`tsbench
train-grpo` in a child process), with each turn its own training row (reasoning_history as-rendered:
the case that used to pay a full-width forward for every padding row).

Printed: the step's seconds split into start (the interpreter, imports, checks and the first prompt
measured), load (the policy's weights), rollouts, update (TRL's step less the rollouts) and the rest
(building the trainer, saving final/, exiting), against the goal that what is not rollouts or update
stays under a quarter; the tokens the step's forwards ran against the tokens its rows hold and the
tokens TRL's full width would have run (the fix: each forward cut to its rows' own length); the
child's peak RSS against 4 GB; and the gradient norm (0 would mean every group was flat)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tsbench.bench.common import measure_in_child, verdict

PRESET = Path(__file__).resolve().parents[3] / "experiments" / "grpo" / "cpu_smoke.toml"
RSS_GOAL_BYTES = 4 * 10**9
TIME_GOAL_S = 600
OVERHEAD_GOAL = 0.25  # what is neither rollouts nor update, as a share of the run
TOKENS_GOAL = 1.3  # tokens the forwards run per token in the rows


def run_cli(out: str) -> tuple[int, float]:
    """Run the step as a child of this (fresh) process: the largest RSS among its children (the
    trainer's; its jailed kernels are far smaller) and the wall clock it started at."""
    command = [sys.executable, "-m", "tsbench.cli", "train-grpo", "--config", str(PRESET), "--max-steps", "1"]
    command += ["--reasoning-history", "as-rendered", "--out", out]
    started = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, started


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        seconds, _, (rss, started) = measure_in_child(run_cli, str(out))
        step = pd.read_parquet(out / "metrics.parquet").iloc[0]
        timing = json.loads((out / "timing.json").read_text())
    ended = started + seconds
    start = timing["checked"] - started
    load = timing["loaded"] - timing["checked"]
    rollouts = float(step["rollout_s"])
    update = (timing["trained"] - timing["trainer"]) - rollouts
    rest = seconds - start - load - rollouts - update
    other = (start + load + rest) / seconds
    grad = float(step.get("grad_norm", float("nan")))
    ran, rows, full = (
        float(step.get(k, float("nan"))) for k in ("tokens/processed", "tokens/in_rows", "tokens/full_width")
    )
    generated = float(step.get("tokens/generated", float("nan")))
    print(
        "train-grpo (CPU, one step of experiments/grpo/cpu_smoke.toml, SmolLM2-135M LoRA 8, G 8, rlm 2 turns, "
        "each turn its own row):\n"
        f"  {seconds:6.1f} s in all (goal < {TIME_GOAL_S} s: {verdict(seconds < TIME_GOAL_S)}) = start {start:.1f} s "
        f"+ load {load:.1f} s + rollouts {rollouts:.1f} s + update {update:.1f} s + trainer setup, save, exit {rest:.1f} s "
        f"({ended - timing['saved']:.1f} s of it exiting)\n"
        f"  not rollouts or update: {other:.0%} of the run (goal < {OVERHEAD_GOAL:.0%}: {verdict(other < OVERHEAD_GOAL)})\n"
        f"  tokens per step: forwards ran {ran:,.0f} for {rows:,.0f} in the rows = {ran / rows:.2f} per row token "
        f"(goal <= {TOKENS_GOAL}: {verdict(ran / rows <= TOKENS_GOAL)}); at TRL's full width {full:,.0f} = "
        f"{full / rows:.2f} (before the fix); {generated:,.0f} of them generated\n"
        f"  peak RSS {rss / 2**30:.2f} GiB ({rss / 1e9:.2f} GB; goal < 4 GB: {verdict(rss < RSS_GOAL_BYTES)})\n"
        f"  grad norm {grad:.4g} (goal > 0: {verdict(grad > 0)}); dropped groups "
        f"{step.get('dropped_groups', 0):.0f}/{step.get('groups', 0):.0f}, forced-final rate "
        f"{step.get('forced_final_rate', float('nan')):.2f}, reward {step.get('reward', float('nan')):.3f}"
    )
    return {"seconds": seconds, "peak_rss": rss, "rollout_s": rollouts, "grad_norm": grad, "tokens_ratio": ran / rows}
