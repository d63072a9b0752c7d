"""GRPO on CPU through TRL: one real step of experiments/grpo/cpu_smoke.toml (SmolLM2-135M, LoRA 8,
one task x G 8 rlm episodes of two short turns in the jail), run as users run it (`tsbench
train-grpo` in a child process): its seconds split into rollouts and the rest, the child's peak RSS
against the 4 GB goal, and the step's gradient norm (0 would mean the step learned nothing: every
group flat and dropped)."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from tsbench.bench.common import measure_in_child, verdict

PRESET = Path(__file__).resolve().parents[3] / "experiments" / "grpo" / "cpu_smoke.toml"
RSS_GOAL_BYTES = 4 * 10**9
TIME_GOAL_S = 600


def run_cli(out: str) -> int:
    """Run the step as a child of this (fresh) process; the largest RSS among its children is the
    trainer's (its jailed kernels are far smaller)."""
    command = [sys.executable, "-m", "tsbench.cli", "train-grpo", "--config", str(PRESET), "--steps", "1", "--out", out]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        seconds, _, rss = measure_in_child(run_cli, str(out))
        step = pd.read_parquet(out / "metrics.parquet").iloc[0]
    rest = seconds - step["rollout_s"]
    grad = float(step.get("grad_norm", float("nan")))

    print(
        "train-grpo (CPU, one step of experiments/grpo/cpu_smoke.toml, SmolLM2-135M LoRA 8, G 8, rlm 2 turns):\n"
        f"  {seconds:6.1f} s in all (goal < {TIME_GOAL_S} s: {verdict(seconds < TIME_GOAL_S)}) = rollouts "
        f"{step['rollout_s']:6.1f} s ({step['mean_generated_tokens']:.0f} generated tokens per episode) "
        f"+ start, load and TRL update {rest:6.1f} s\n"
        f"  peak RSS {rss / 2**30:.2f} GiB ({rss / 1e9:.2f} GB; goal < 4 GB: {verdict(rss < RSS_GOAL_BYTES)})\n"
        f"  grad norm {grad:.4g} (goal > 0: {verdict(grad > 0)}); dropped groups "
        f"{step.get('dropped_groups', 0):.0f}/{step.get('groups', 0):.0f}, forced-final rate "
        f"{step.get('forced_final_rate', float('nan')):.2f}, reward {step.get('reward', float('nan')):.3f}"
    )
    return {"seconds": seconds, "peak_rss": rss, "rollout_s": float(step["rollout_s"]), "grad_norm": grad}
