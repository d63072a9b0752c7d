"""GRPO with the family's training stream in the loop (timerlm-anomalyxl §4.1), on TRL's GRPOTrainer.

Read top to bottom. One optimizer step is:

    TRL's sampler hands this process its share of the step's task keys, each G times
    -> rollouts.Environment (TRL's rollout_func) plays every one through our harness with the live
       policy, scores it with the family's scorer, logs it with the one record builder
    -> the reward functions (rewards.py) read the episodes' columns; TRL sums them with the
       reward weights, forms group advantages (Dr. GRPO: R - mean, no std) and drops nothing itself:
       the environment already masked out zero-variance groups (replayed first with refill_rounds)
       and infrastructure failures
    -> TRL's clipped surrogate over the generated tokens (env mask), loss "dr_grpo" (a constant
       normaliser) or "grpo" (TimeMaster eq. 7), KL to the reference at weight beta
    -> checkpoints every `save_every` steps (TRL/transformers format, resumable), metrics.parquet.

What is TRL's: the loss, the reference model, vLLM weight sync, DDP / FSDP / DeepSpeed, optimizer,
scheduler, checkpoints, and the config itself (train/config.py: GRPOConfig is trl.GRPOConfig). What is
ours: the environment, the rewards, the run dir, forwards at each micro-batch's own width
(train/trainer.py); the tasks (and a generator family's curriculum) are the family's.
Several GPUs: `tsbench train-grpo --num-processes N` relaunches itself under `accelerate launch`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, TrainerCallback

from tsbench.core.errors import UserError
from tsbench.core.json_input import read_json
from tsbench.harness import get_harness, require_jail
from tsbench.train import rewards as rw
from tsbench.train.config import GRPOConfig
from tsbench.train.cpu_memory import limit_malloc_arenas
from tsbench.train.tracking import tracking

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
FINAL = "final"
METRICS = "metrics.parquet"
TRAIN_JSON = "train.json"
# What an aborted run leaves that a fresh start clears: metrics, the journal, per-rank keys, TensorBoard's
STALE = (METRICS, "rollouts", "ranks", f"{CHECKPOINTS}/runs")
# What must not change when a run resumes: the policy, the episodes, the rewards, the loss, and
# the curriculum's cut-over (checked as "warm_steps", resolved from steps x fraction).
RESUME_KEYS = (
    "model",
    "lora",
    "lora_alpha",
    "lora_target",
    "group_size",
    "batch_size",
    "max_seq_len",
    "loss_type",
    "scale_rewards",
    "advantage_std",
    "beta",
    "epsilon",
    "epsilon_high",
    "refill_rounds",
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_max",
    "reward",
    "lambda_tok",
    "lambda_fail",
    "format_weight",
    "hard_weight",
    "soft_weight",
    "judge",
    "format_rule",
    "family",
    "data",
    "categories",
    "lengths",
    "preset",
    "seed",
    "harness",
    "max_turns",
    "max_tokens",
    "temperature",
    "warm_steps",
    "reasoning_history",
)

ProgressFn = Callable[[int, int, dict], None]  # (step, total steps, that step's metrics)


def train_grpo(cfg: GRPOConfig, progress: ProgressFn | None = None) -> Path:
    """Train; returns the run dir. <run>/final loads as `local/<run>/final`. <run>/timing.json has the wall
    clock (time.time()) at each phase's end: what `make bench` splits a run's seconds by."""
    timing = {"build": time.time()}
    with tracking(cfg.report_to, cfg.run_dir()):
        run = build_trainer(cfg, progress, timing)
        timing["trainer"] = time.time()
        run.trainer.train(resume_from_checkpoint=str(run.checkpoint) if run.checkpoint else None)
        timing["trained"] = time.time()
    final = run.out / FINAL
    full_state_dict_at_save(run.trainer.accelerator)
    run.trainer.save_model(str(final))
    if run.trainer.accelerator.is_main_process:
        from tsbench.train.policy import name_base

        name_base(final, run.base_record)
        timing["saved"] = time.time()
        (run.out / "timing.json").write_text(json.dumps(timing))
    run.trainer.accelerator.wait_for_everyone()
    return run.out


def full_state_dict_at_save(accelerator: Any) -> None:
    """FSDP checkpoints stay sharded (fast, resumable), but `final/` must be one Hugging Face directory
    `local/<run>/final` loads: transformers' `save_model` writes the model files only for FULL_STATE_DICT
    (rank 0 gathers them), so the plugin switches to it for the last save (accelerate's documented
    "train sharded, save full")."""
    plugin = getattr(accelerator.state, "fsdp_plugin", None)
    if plugin is not None and "FULL_STATE_DICT" not in str(plugin.state_dict_type):
        plugin.state_dict_config = plugin.optim_state_dict_config = None  # else the sharded configs stay
        plugin.set_state_dict_type("FULL_STATE_DICT")


@dataclass
class Run:
    trainer: Any  # trl.GRPOTrainer, configured, not yet trained
    out: Path
    checkpoint: Path | None  # the checkpoint --resume continues from
    env: Any  # rollouts.Environment
    base_record: str  # what saved adapters name as their base


def build_trainer(cfg: GRPOConfig, progress: ProgressFn | None = None, timing: dict | None = None) -> Run:
    """Everything `train_grpo` needs, up to (not including) `trainer.train()`."""
    timing = {} if timing is None else timing
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL-experimental; we pin TRL's version
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")  # TRL 1.16 on transformers 5.24
    import torch
    from datasets import Dataset

    from tsbench.train.budget import check_context
    from tsbench.train.launch import check_devices, distributed_state
    from tsbench.train.periodic_eval import periodic_eval
    from tsbench.train.policy import load_policy, source_is_vision_language, source_tokenizer
    from tsbench.train.rollouts import Environment
    from tsbench.train.trainer import episode_trainer_class

    # the first PartialState creates the process group: its timeout is ddp_timeout, set now or never
    state = distributed_state(cfg.ddp_timeout, cpu=not torch.cuda.is_available())  # CPU processes: gloo
    cfg.validate(state.num_processes)
    on_gpu = torch.cuda.is_available()
    check_devices(cfg, state, on_gpu)  # paths that cannot work on these devices: one line, before anything starts
    require_jail(cfg.harness, cfg.harness_config.unsafe_sandbox)  # not a run of error episodes
    evals = periodic_eval(cfg)  # the held-out rows are read (or refused) before any weights load
    if not on_gpu:
        limit_malloc_arenas()  # a lower CPU peak (train/cpu_memory.py)
    vision = source_is_vision_language(cfg.policy.model)
    check_images(cfg, vision)
    history = check_context(cfg, source_tokenizer(cfg.policy.model))  # before weights load
    out = cfg.run_dir()
    checkpoint = prepare_run_dir(cfg, out, state.is_main_process)
    rows = cfg.harness_config.max_turns if history == "as-rendered" else 1
    if problems := cfg.scaling_problems(rows):
        raise UserError("; ".join(problems))
    from tsbench.tasks import get_taskset

    weights = rw.reward_functions(cfg.rewards, get_taskset(cfg.tasks.family))[1]
    # TRL's config (and under DeepSpeed its plugin, so zero3_init_flag shards the weights as they load)
    # exists before the policy loads
    args = cfg.for_launch(world=state.num_processes, rows=rows, on_gpu=on_gpu, reward_weights=weights)
    timing["checked"] = time.time()
    policy = load_policy(cfg.policy, out, on_gpu=on_gpu)
    timing["loaded"] = time.time()
    check_images(cfg, policy.processor is not None)
    env = Environment(
        cfg, policy.tokenizer, out, model_name=cfg.policy.model, processor=policy.processor, history=history
    )
    if env.rows_per_episode != rows:
        raise RuntimeError(f"{env.rows_per_episode} rows per episode, TRL was told {rows}")
    trainer = episode_trainer_class()(
        model=policy.model,
        reward_funcs=env.functions,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": env.keys()}),
        processing_class=policy.processing_class,
        peft_config=policy.peft_config,
        environment=env,
        callbacks=[RunLog(out, env, policy.base_record, progress, start=step_of(checkpoint)), *evals],
    )
    for callback in evals:
        callback.attach(trainer, env)
    trainer.remove_callback(PrinterCallback)  # RunLog reports each step (metrics.parquet, the progress line)
    return Run(trainer, out, checkpoint, env, policy.base_record)


def check_images(cfg: GRPOConfig, vision_language: bool | None) -> None:
    """Refuse, before any weights load, a run whose images the policy would never see in its loss
    (`vision_language` None: the model's config is not readable yet; the checks wait for the weights).
    A vision-language model under a text harness (Table 1's Qwen3.5-4B under rlm) trains as it is, its
    vision tower idle; its rollouts may come from vLLM, which takes the images beside the ids when a
    harness shows them (TRL's own vision-language vLLM path, agent.VLLMColocate / VLLMServer)."""
    images = get_harness(cfg.harness).images  # "prompt": the only place a VLM's loss sees them
    if images and vision_language is False:
        raise UserError(
            f"--harness {cfg.harness} shows the policy images, but {cfg.policy.model} is a text-only model: "
            "train a vision-language model (e.g. Qwen2.5-VL) or use a text harness"
        )
    if vision_language and images == "observations":
        raise UserError(
            f"--harness {cfg.harness}: images in later observations are not trained on yet; "
            "train a vision-language policy under single-pass-image"
        )


# =============================================================================================
# The run dir: train.json (config, versions, resume check), checkpoints/, final/, metrics.parquet,
# rollouts/ (the journal of every episode), warm_start/ (when --model was an SFT adapter)
# =============================================================================================
def resume_view(cfg: GRPOConfig) -> dict:
    from tsbench.core.config import flat

    values = json.loads(json.dumps(flat(cfg), default=str))
    values["soft_weight"] = cfg.rewards.soft
    # how a composite reply is read (public or paper); an anomalyxl run reads no tags, so None, as a run
    # recorded before the setting existed has it
    values["format_rule"] = cfg.rewards.format_rule if cfg.rewards.reward == "composite" else None
    values["warm_steps"] = cfg.warm_steps
    values["scale_rewards"] = cfg.reward_scaling
    # runs recorded before the setting existed trained with TRL's sample std: None, as they have it
    values["advantage_std"] = None if cfg.advantage_std == "sample" else cfg.advantage_std
    values["temperature"] = cfg.temperature
    return {k: values.get(k) for k in RESUME_KEYS}


def step_of(checkpoint: Path | None) -> int:
    return int(checkpoint.name.rsplit("-", 1)[1]) if checkpoint is not None else 0


def prepare_run_dir(cfg: GRPOConfig, out: Path, main: bool) -> Path | None:
    """The checkpoint to resume from (None for a fresh start); refuses to mix runs."""
    found = (p for p in (out / CHECKPOINTS).glob("checkpoint-*") if (p / "trainer_state.json").is_file())
    existing = sorted(found, key=step_of)
    latest = existing[-1] if existing else None
    info_path = out / TRAIN_JSON
    if latest is not None and not cfg.resume:
        raise UserError(
            f"{out} already holds a run (last checkpoint {latest.name}); "
            "pass --resume to continue it or choose another --out"
        )
    if cfg.resume and info_path.exists():
        previous = read_json(info_path).get("resume", {})
        now = resume_view(cfg)
        changed = [k for k in RESUME_KEYS if previous.get(k) != now.get(k)]
        if changed:
            detail = ", ".join(f"{k} {previous.get(k)!r} -> {now.get(k)!r}" for k in changed)
            raise UserError(
                f"{out} was trained with other settings ({detail}); resume with the same settings "
                "(the curriculum's cut-over moves with --steps: pin it with warm_steps) or choose another --out"
            )
    if cfg.resume and latest is None:
        log.warning("--resume: no checkpoint in %s yet; starting from step 1", out)
    from tsbench.train.policy import WARM_START  # replaced when it holds no finished fold

    leftovers = [name for name in (*STALE, WARM_START) if (out / name).exists()] if latest is None else []
    if leftovers and not (out / TRAIN_JSON).is_file():  # not an aborted run of ours: the user's own folders
        raise UserError(
            f"{out} holds {leftovers[0]} but is not a GRPO run dir (no {TRAIN_JSON}); "
            "refused to delete it: choose another --out"
        )
    if main:
        from tsbench.core.provenance import git_commit, versions, write_json

        if latest is None:  # a fresh start: whatever an aborted run left here goes
            (out / METRICS).unlink(missing_ok=True)
            for name in STALE[1:]:
                shutil.rmtree(out / name, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        write_json(
            info_path,
            {
                "config": json.loads(json.dumps(cfg.to_dict(), default=str)),
                "resume": resume_view(cfg),
                "resumed_from": latest.name if latest else None,
                "versions": versions(("torch", "transformers", "trl", "peft", "accelerate")),
                "git_commit": git_commit(),
            },
        )
    return latest


# =============================================================================================
# One callback: metrics.parquet (TRL's numbers + the environment's), adapters that name their
# base, and the progress line
# =============================================================================================
class RunLog(TrainerCallback):
    def __init__(self, out: Path, env: Any, base_record: str, progress: ProgressFn | None, start: int = 0):
        self.path = out / METRICS
        self.checkpoints = out / CHECKPOINTS
        self.env = env
        self.base_record = base_record
        self.progress = progress
        self.rows: list[dict] = []
        if self.path.exists():
            import pandas as pd

            self.rows = [r for r in pd.read_parquet(self.path).to_dict("records") if r["step"] <= start]

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **_: Any) -> None:
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        import pandas as pd

        row = {"step": int(state.global_step), **{k: float(v) for k, v in logs.items() if _number(v)}, **self.env.last}
        self.rows = [r for r in self.rows if r["step"] != row["step"]] + [row]
        tmp = self.path.with_suffix(".parquet.tmp")
        pd.DataFrame(self.rows).to_parquet(tmp, index=False)
        tmp.replace(self.path)
        if self.progress is not None:
            self.progress(row["step"], int(state.max_steps), row)

    def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if state.is_world_process_zero:
            from tsbench.train.policy import name_base

            name_base(self.checkpoints / f"checkpoint-{state.global_step}", self.base_record)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class LineProgress:
    """A ready-made `progress` callback: one line per step on a rich console."""

    def __init__(self, console: Any):
        self.console = console

    def __call__(self, step: int, total: int, row: dict) -> None:
        def show(key: str, fmt: str = ".3f") -> str:
            value = row.get(key)
            return "-" if value is None or value != value else format(value, fmt)

        self.console.print(
            f"step {step}/{total}  score {show('mean_score')}  reward {show('reward')}  loss {show('loss', '.4f')}  "
            f"kl {show('kl', '.4f')}  forced {show('forced_final_rate', '.2f')}  dropped "
            f"{show('dropped_groups', '.0f')}/{show('groups', '.0f')}  {show('step_time', '.0f')}s",
            markup=False,
        )
