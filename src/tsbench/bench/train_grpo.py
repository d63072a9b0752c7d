"""GRPO on CPU through TRL: one real step of experiments/grpo/cpu_smoke.toml (SmolLM2-135M, LoRA 8,
one task x G 4 rlm episodes of about 850 tokens in the jail), its seconds split into rollouts and
TRL's update, and the peak RSS of the process against the 4 GB goal."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tsbench.bench.common import measure_in_child

PRESET = Path(__file__).resolve().parents[3] / "experiments" / "grpo" / "cpu_smoke.toml"
RSS_GOAL_BYTES = 4 * 10**9


def run_one_step(out: str) -> dict:
    import pandas as pd

    from tsbench.core.config import build, read_toml_table
    from tsbench.train.config import GRPOConfig
    from tsbench.train.grpo import train_grpo

    settings = {**read_toml_table(PRESET, "grpo"), "steps": 1, "out": out}
    cfg = build(GRPOConfig, settings)
    cfg.validate()
    train_grpo(cfg)
    row = pd.read_parquet(Path(out) / "metrics.parquet").iloc[0]
    return {key: float(row[key]) for key in ("rollout_s", "mean_generated_tokens", "groups", "dropped_groups")}


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        seconds, rss, step = measure_in_child(run_one_step, str(Path(tmp) / "run"))
    update = seconds - step["rollout_s"]
    print(
        "train-grpo (CPU, one step of experiments/grpo/cpu_smoke.toml, SmolLM2-135M LoRA 8, G 4):\n"
        f"  step {seconds:6.1f} s (model load included) = rollouts {step['rollout_s']:6.1f} s "
        f"({step['mean_generated_tokens']:.0f} generated tokens per episode) + load and TRL update {update:6.1f} s\n"
        f"  peak RSS {rss / 2**30:.2f} GiB ({rss / 1e9:.2f} GB; goal < 4 GB: {'met' if rss < RSS_GOAL_BYTES else 'MISSED'})"
    )
    return {"seconds": seconds, "peak_rss": rss, **step}
