"""Every training config under experiments/ passes `--check` offline, against its model's own config.json
(tests/fixtures/hub, laid out as a Hugging Face cache with stand-in tokenizers: fixtures/hub/SOURCES.md),
and the plans say what the issue asks: Table 1's Qwen3.5 recipe starts with vLLM rollouts (the VLM through
TRL's vision-language vLLM path), TimeMaster's preset fits 4 x 80 GB. One child process runs every check
(the cache is read from the environment when huggingface_hub is imported); the plans are printed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from hub_cache import model_files, offline_hub
from tsbench.testing import readiness
from tsbench.train.memory_plan import ModelShape, Strategy, Workload, plan, strategy_from_accelerate

ROOT = Path(__file__).resolve().parents[1]
GRPO = sorted((ROOT / "experiments/grpo").glob("*.toml")) + [
    ROOT / "experiments/timemaster/cpu_smoke.toml",
    ROOT / "experiments/timemaster/grpo_qwen2.5-vl-3b.toml",
]
SFT = sorted((ROOT / "experiments/sft").glob("*.toml")) + [
    ROOT / "experiments/timemaster/sft_warm_start_qwen2.5-vl-3b.toml"
]
DRIVER = """
import contextlib, io, json, sys
from tsbench.cli import main
out = []
for args in json.loads(sys.argv[1]):
    sys.argv, text, err = ["tsbench", *args], io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
    out.append({"code": code, "out": text.getvalue(), "err": err.getvalue()})
print(json.dumps(out))
"""  # tsbench command lines (argv lists) run in one child process: one import of TRL for them all


@pytest.fixture(scope="module")
def checks(tmp_path_factory) -> dict:
    """Every config's --check, run where experiments/ is `./experiments` (its paths are relative to the
    repository root), with the warm start TimeMaster's GRPO starts from in place (a full fine-tune of
    Qwen2.5-VL-3B saves its config and processor) and a tiny TimerBed HAR split as its data."""
    from test_timemaster_configs import make_har_split

    work = tmp_path_factory.mktemp("check")
    (work / "experiments").symlink_to(ROOT / "experiments")
    model_files("Qwen--Qwen2.5-VL-3B-Instruct", work / "models" / "sft-timemaster-qwen2.5-vl-3b")
    make_har_split(work / "data" / "timerbed")
    hub = offline_hub(work)
    jobs = [("train-grpo", str(p.relative_to(ROOT))) for p in GRPO] + [
        ("sft-baseline", str(p.relative_to(ROOT))) for p in SFT
    ]
    commands = [[command, "--config", path, "--check"] for command, path in jobs]
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(hub),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    done = readiness.run(
        [sys.executable, "-c", DRIVER, json.dumps(commands)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = dict(zip((path for _, path in jobs), json.loads(done.stdout.splitlines()[-1])))
    for path, result in found.items():
        print(f"\n$ tsbench ... --config {path} --check\n{result['out']}{result['err']}")
    shutil.rmtree(work / "hub", ignore_errors=True)
    return found


@pytest.mark.parametrize("path", [str(p.relative_to(ROOT)) for p in GRPO + SFT])
def test_every_training_config_passes_check_offline(checks, path):
    result = checks[path]
    assert result["code"] == 0, result["err"]
    assert "--check" in result["out"] and "fits" in result["out"] and "does NOT fit" not in result["out"]
    assert "devices    ok" in result["out"] or path.startswith("experiments/sft") or "sft_warm" in path
    if "sft" not in path:  # TRL's own validation ran on the exact config, and the timeouts are in numbers
        assert "trl        GRPOConfig.__post_init__ accepts" in result["out"]
        assert "refused" not in result["out"]
        multi = "num_processes = 1\n" not in Path(ROOT / path).read_text() and "cpu_smoke" not in path
        assert not multi or re.search(r"rollouts end within [\d,]+ s .*: [\d,]+ s\s+to\s+spare", result["out"], re.S), (
            path
        )


def test_table_1_starts_with_vllm_rollouts_and_renders_as_eval(checks):
    text = checks["experiments/grpo/timerlm_qwen3.5-4b.toml"]["out"]
    assert "qwen3_5, vision-language" in text and "engine     vllm-colocate" in text and "token ids only" in text
    assert "as-rendered: 15 training row(s)" in text  # Qwen3.5's template drops earlier reasoning
    assert "declares kernel (in the jail), memory, turn_rows; [rlm] depth=0, max_blocks_per_reply=16" in text
    assert "ddp_timeout 3,600 s" in text and "within 2,400 s on each process" in text
    if importlib.util.find_spec("fla") is None:  # Qwen3.5's Gated DeltaNet kernels: named with the install line
        assert "warning    flash-linear-attention is not installed" in text and "tsbench[gpu]" in text


def test_timemasters_preset_fits_four_80_gb_gpus_with_vllm_and_a_bf16_reference(checks):
    text = checks["experiments/timemaster/grpo_qwen2.5-vl-3b.toml"]["out"]
    assert (
        "4 process(es) on 1 machine, zero2" in text and "vllm-colocate" in text and "plots beside the token ids" in text
    )
    assert "of 80 GiB per GPU: fits" in text and "reference 1" not in text  # beta 0.001: a bf16 copy (~7 GiB)


def _shape(**changes) -> ModelShape:
    base = dict(
        params=3_750_000_000,
        vision_params=670_000_000,
        hidden=2048,
        intermediate=11008,
        layers=36,
        attention_layers=36,
        kv_heads=2,
        head_dim=128,
        vocab=151936,
    )
    return ModelShape(**{**base, **changes})


def _work(**changes) -> Workload:
    base = dict(
        micro_batch=4,
        row_tokens=2048,
        gradient_checkpointing=True,
        beta=0.001,
        engine="hf",
        episodes_in_flight=40,
        max_seq_len=2048,
        vllm_share=0.3,
        gpu_gib=80.0,
    )
    return Workload(**{**base, **changes})


def test_the_plan_that_ran_out_of_memory_does_not_fit_and_sharding_makes_it_fit():
    """The issue's reading: full-parameter fp32 + Adam under DDP is ~60 GB a rank, plus a reference model."""
    ddp = plan(_shape(), Strategy("ddp", 4), _work())
    assert 55 < ddp.parts["weights"] + ddp.parts["grads"] + ddp.parts["optimizer"] < 60
    zero2 = plan(
        _shape(),
        strategy_from_accelerate({"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 2}}, 4),
        _work(),
    )
    assert zero2.fits and zero2.total < ddp.total - 25
    assert zero2.parts["reference"] == pytest.approx(2 * 3.75e9 / 2**30)  # bf16, whole on each rank under ZeRO-2
    zero3 = plan(_shape(), Strategy("zero3", 4), _work())
    assert zero3.parts["reference"] == pytest.approx(zero2.parts["reference"] / 4)
    lora = plan(_shape(lora_params=10_000_000), Strategy("ddp", 4), _work())
    assert lora.parts["reference"] == 0 and lora.parts["optimizer"] < 0.1


def test_a_vllm_share_too_small_for_the_weights_does_not_fit():
    tight = plan(_shape(), Strategy("zero3", 8), _work(engine="vllm-colocate", vllm_share=0.05))
    assert not tight.fits and any("does not hold the bf16 weights" in n for n in tight.notes)


def test_check_offline_says_so_in_one_line_without_the_hubs_retries(tmp_path):
    # the hub at a closed loopback port and an empty cache: one refused connection, no back-off retries
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_CACHE=str(tmp_path / "hub"), HF_HOME=str(tmp_path / "hf"))
    command = [sys.executable, "-m", "tsbench.cli", "train-grpo", "--model", "Qwen/Qwen3.5-4B", "--check"]
    done = readiness.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is not in the Hugging Face cache and http://127.0.0.1:9 cannot be reached" in lines[0]


def test_zero_model_states_are_deepspeeds_estimators_and_the_context_is_counted():
    # DeepSpeed's estimate_zero{2,3}_model_states_mem_needs without offload, written out:
    # ZeRO-3 largest_layer x 4 + 18 P / GPUs; ZeRO-2 4 P + 16 P / GPUs
    shape = _shape(largest_layer_params=151936 * 2048)
    P, L, gib = shape.params, shape.largest_layer_params, 2**30
    states = ("weights", "grads", "optimizer", "zero buffers")
    zero3 = plan(shape, Strategy("zero3", 8), _work(beta=0.0))
    live = 2 * 1e9 / gib  # stage3_max_live_parameters in bf16
    assert sum(zero3.parts[k] for k in states) - live == pytest.approx((4 * L + 18 * P / 8) / gib)
    zero2 = plan(shape, Strategy("zero2", 4), _work(beta=0.0))
    assert sum(zero2.parts[k] for k in states) == pytest.approx((4 * P + 16 * P / 4) / gib)
    assert zero3.parts["context"] > 0 and "context" not in plan(shape, Strategy("zero3", 8), _work(on_gpu=False)).parts
    offloaded = plan(shape, Strategy("zero3", 8, offload_optimizer=True), _work(beta=0.0))
    assert "zero buffers" not in offloaded.parts  # the estimator's offload accounting is another formula: not claimed


def test_a_cpu_plan_counts_the_runtime_and_fp32_and_no_cuda_context():
    """On CPU the process holds the imported runtime, generates and trains in fp32, and has no CUDA context."""
    from tsbench.train.memory_plan import CPU_RUNTIME_GIB

    shape, strategy = _shape(lora_params=2_000_000), Strategy("one-gpu", 1)
    gpu = plan(shape, strategy, _work(beta=0.0))
    cpu = plan(shape, strategy, _work(beta=0.0, on_gpu=False))
    assert "context" in gpu.parts and "context" not in cpu.parts and cpu.parts["runtime"] == CPU_RUNTIME_GIB
    for part, ratio in (("activations", 2.0), ("kv cache", 2.0), ("weights", 4.0 / 2.0)):
        assert cpu.parts[part] == pytest.approx(ratio * gpu.parts[part], rel=0.01), part


def test_the_cpu_recipes_plan_a_processs_peak_rss_near_the_measured_one(checks):
    """experiments/grpo/cpu_smoke.toml's peak RSS was measured at 2.70-3.01 GiB (make bench, section train;
    the phases in memory_plan.py's docstring); its plan must be of that size, not a GPU's."""
    for path in ("experiments/grpo/cpu_smoke.toml", "experiments/timemaster/cpu_smoke.toml"):
        out = checks[path]["out"]
        assert "GiB of peak RSS on CPU" in out and "runtime" in out and "context" not in out, out
    total = float(re.search(r"total ([\d.]+) of", checks["experiments/grpo/cpu_smoke.toml"]["out"]).group(1))
    assert 2.5 <= total <= 3.5
