"""GRPO on CPU through TRL: one real step of experiments/grpo/cpu_smoke.toml (SmolLM2-135M, LoRA 8,
one task x G 4 rlm episodes of about 850 tokens in the jail), run as users run it (`tsbench
train-grpo` in a child process), its seconds split into rollouts and the rest, and the child's peak
RSS against the 4 GB goal."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from tsbench.bench.common import measure_in_child

PRESET = Path(__file__).resolve().parents[3] / "experiments" / "grpo" / "cpu_smoke.toml"
RSS_GOAL_BYTES = 4 * 10**9


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
    verdict = "met" if rss < RSS_GOAL_BYTES else "MISSED"
    print(
        "train-grpo (CPU, one step of experiments/grpo/cpu_smoke.toml, SmolLM2-135M LoRA 8, G 4):\n"
        f"  {seconds:6.1f} s in all = rollouts {step['rollout_s']:6.1f} s "
        f"({step['mean_generated_tokens']:.0f} generated tokens per episode) "
        f"+ start, load and TRL update {rest:6.1f} s\n"
        f"  peak RSS {rss / 2**30:.2f} GiB ({rss / 1e9:.2f} GB; goal < 4 GB: {verdict})"
    )
    return {"seconds": seconds, "peak_rss": rss, "rollout_s": float(step["rollout_s"])}
