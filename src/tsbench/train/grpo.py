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
scheduler, checkpoints. What is ours: the environment, the rewards, the run dir; the tasks (and a
generator family's curriculum) are the family's.
Several GPUs: `tsbench train-grpo --num-processes N` relaunches itself under `accelerate launch`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, TrainerCallback

from tsbench.core.errors import UserError
from tsbench.core.tracking import check_targets
from tsbench.harness import get_harness, require_jail
from tsbench.train.config import GRPOConfig
from tsbench.train.cpu_memory import limit_malloc_arenas
from tsbench.train.tracking import tracking

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
FINAL = "final"
METRICS = "metrics.parquet"
TRAIN_JSON = "train.json"
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
    "loss",
    "scale_rewards",
    "beta",
    "epsilon",
    "epsilon_high",
    "refill_rounds",
    "importance_sampling",
    "importance_sampling_cap",
    "reward",
    "lambda_tok",
    "lambda_fail",
    "format_weight",
    "hard_weight",
    "soft_weight",
    "judge",
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
    """Train; returns the run dir. <run>/final loads as `local/<run>/final`."""
    with tracking(cfg.report_to, cfg.run_dir()):
        run = build_trainer(cfg, progress)
        run.trainer.train(resume_from_checkpoint=str(run.checkpoint) if run.checkpoint else None)
    final = run.out / FINAL
    full_state_dict_at_save(run.trainer.accelerator)
    run.trainer.save_model(str(final))
    if run.trainer.accelerator.is_main_process:
        from tsbench.train.policy import name_base

        name_base(final, run.base_record)
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


def build_trainer(cfg: GRPOConfig, progress: ProgressFn | None = None) -> Run:
    """Everything `train_grpo` needs, up to (not including) `trainer.train()`."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL-experimental; we pin TRL's version
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")  # TRL 1.16 on transformers 5.24
    import torch
    from accelerate import PartialState
    from accelerate.utils import DistributedType
    from trl import GRPOTrainer

    from tsbench.train.budget import check_context
    from tsbench.train.periodic_eval import periodic_eval
    from tsbench.train.policy import load_policy, source_is_vision_language, source_tokenizer
    from tsbench.train.rollouts import Environment
    from tsbench.train.vision_trainer import vision_trainer_class

    state = PartialState(cpu=not torch.cuda.is_available())  # several CPU processes: gloo (MULTI_CPU)
    cfg.validate(state.num_processes)
    require_jail(cfg.harness, cfg.harness_config.unsafe_sandbox)  # not a run of error episodes
    evals = periodic_eval(cfg)  # the held-out rows are read (or refused) before any weights load
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        limit_malloc_arenas()  # a lower CPU peak (train/cpu_memory.py)
    if cfg.rollout.engine == "hf" and state.distributed_type == DistributedType.FSDP:
        raise UserError(
            "FSDP shards the weights the hf engine would generate with: use --engine vllm-colocate "
            "or vllm-server (or DeepSpeed ZeRO-3, experiments/grpo/accelerate/zero3.yaml)"
        )
    if cfg.rollout.engine != "hf" and not on_gpu:
        raise UserError(
            f"--engine {cfg.rollout.engine} needs vLLM on a GPU machine (pip install 'tsbench[gpu]'); "
            "use --engine hf on CPU"
        )
    vision = source_is_vision_language(cfg.policy.model)
    check_images(cfg, vision)
    history = check_context(cfg, source_tokenizer(cfg.policy.model), vision=bool(vision))  # before weights load
    out = cfg.run_dir()
    checkpoint = prepare_run_dir(cfg, out, state.is_main_process)
    policy = load_policy(cfg.policy, out, on_gpu=on_gpu)
    check_images(cfg, policy.processor is not None)
    if policy.processor is not None:
        history = "as-generated"  # one row per episode: the first prompt's images ride on it (vision_trainer.py)
    env = Environment(
        cfg, policy.tokenizer, out, model_name=cfg.policy.model, processor=policy.processor, history=history
    )
    # a vision-language policy: the episodes' images reach TRL's loss forward (train/vision_trainer.py)
    trainer_class, rollout = (
        (vision_trainer_class(), {"environment": env}) if policy.processor else (GRPOTrainer, {"rollout_func": env})
    )
    trainer = trainer_class(
        model=policy.model,
        reward_funcs=env.functions,
        args=trl_args(cfg, out, env.weights, on_gpu=on_gpu, world=state.num_processes, rows=env.rows_per_episode),
        train_dataset=dataset(env.keys()),
        processing_class=policy.processing_class,
        peft_config=policy.peft_config,
        **rollout,
        callbacks=[RunLog(out, env, policy.base_record, progress, start=step_of(checkpoint)), *evals],
    )
    for callback in evals:
        callback.attach(trainer, env)
    trainer.remove_callback(PrinterCallback)  # RunLog reports each step (metrics.parquet, the progress line)
    return Run(trainer, out, checkpoint, env, policy.base_record)


def check_images(cfg: GRPOConfig, vision_language: bool | None) -> None:
    """Refuse, before any weights load, a run whose images the policy would never see in its loss
    (`vision_language` None: the model's config is not readable yet; the checks wait for the weights)."""
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
    if vision_language and cfg.rollout.engine != "hf":
        raise UserError(f"--engine {cfg.rollout.engine} does not pass images to vLLM yet: use --engine hf for a VLM")


def trl_args(
    cfg: GRPOConfig, out: Path, reward_weights: list[float], *, on_gpu: bool, world: int, rows: int = 1
) -> Any:
    """Our settings in TRL's words. One generation per optimizer step (strictly on-policy).

    `rows` training rows per episode (reasoning_history as-rendered: one per turn, rollouts.Environment):
    TRL's group is then G x rows rows that all carry their episode's reward, so its group mean (and Dr. GRPO's
    R - mean) is the episodes' own; a forward still takes micro_batch_size rows (accumulation x rows), and
    the constant normaliser is divided by rows so the summed token loss is scaled as with one row. (loss grpo
    averages each turn as a sequence of its own; scale_rewards group divides by a std over G x rows rows,
    within sqrt(rows (G - 1) / (G rows - 1)) of the episodes' own.)"""
    from trl import GRPOConfig as TRLConfig

    accumulation = cfg.batch_size // (cfg.micro_batch_size * world) * rows
    vllm = cfg.rollout.engine != "hf"
    return TRLConfig(
        output_dir=str(out / CHECKPOINTS),
        max_steps=cfg.steps,
        seed=cfg.seed,
        data_seed=cfg.seed,
        per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=accumulation,
        num_generations=cfg.group_size * rows,
        shuffle_dataset=False,
        num_iterations=1,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        max_grad_norm=cfg.max_grad_norm,
        loss_type=cfg.loss,
        scale_rewards=cfg.reward_scaling,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        max_completion_length=max(1, cfg.episode_tokens() // rows),
        reward_weights=reward_weights,
        disable_dropout=True,
        mask_truncated_completions=False,
        gradient_checkpointing=cfg.policy.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False} if cfg.policy.gradient_checkpointing else None,
        bf16=on_gpu,
        fp16=False,
        use_cpu=not on_gpu,
        use_vllm=vllm,
        vllm_mode="server" if cfg.rollout.engine == "vllm-server" else "colocate",
        vllm_server_base_url=cfg.rollout.vllm_server_url if cfg.rollout.engine == "vllm-server" else None,
        vllm_gpu_memory_utilization=cfg.rollout.vllm_gpu_memory,
        vllm_max_model_length=cfg.max_seq_len,
        vllm_importance_sampling_correction=cfg.rollout.importance_sampling != "none",
        vllm_importance_sampling_mode=(
            "token_truncate" if cfg.rollout.importance_sampling == "none" else cfg.rollout.importance_sampling
        ),
        vllm_importance_sampling_clip_max=cfg.rollout.importance_sampling_cap,
        save_strategy="steps",
        save_steps=cfg.save_every,
        save_total_limit=cfg.keep_checkpoints,
        logging_steps=1,
        report_to=check_targets(cfg.report_to),
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
    )


def dataset(keys: list[str]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": keys})


# =============================================================================================
# The run dir: train.json (config, versions, resume check), checkpoints/, final/, metrics.parquet,
# rollouts/ (the journal of every episode), warm_start/ (when --model was an SFT adapter)
# =============================================================================================
def resume_view(cfg: GRPOConfig) -> dict:
    from tsbench.core.config import flat

    values = json.loads(json.dumps(flat(cfg), default=str))
    values["soft_weight"] = cfg.rewards.soft
    values["warm_steps"] = cfg.warm_steps
    return {k: values.get(k) for k in RESUME_KEYS}


def checkpoint_dirs(out: Path) -> list[Path]:
    root = out / CHECKPOINTS
    found = [p for p in root.glob("checkpoint-*") if (p / "trainer_state.json").is_file()] if root.is_dir() else []
    return sorted(found, key=step_of)


def step_of(checkpoint: Path | None) -> int:
    return int(checkpoint.name.rsplit("-", 1)[1]) if checkpoint is not None else 0


def prepare_run_dir(cfg: GRPOConfig, out: Path, main: bool) -> Path | None:
    """The checkpoint to resume from (None for a fresh start); refuses to mix runs."""
    existing = checkpoint_dirs(out)
    latest = existing[-1] if existing else None
    info_path = out / TRAIN_JSON
    if latest is not None and not cfg.resume:
        raise UserError(
            f"{out} already holds a run (last checkpoint {latest.name}); "
            "pass --resume to continue it or choose another --out"
        )
    if cfg.resume and info_path.exists():
        previous = json.loads(info_path.read_text()).get("resume", {})
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
    if main:
        from tsbench.core.provenance import git_commit, versions, write_json

        if latest is None:  # a fresh start: whatever an aborted run left here goes
            (out / METRICS).unlink(missing_ok=True)
            for name in ("rollouts", "ranks", f"{CHECKPOINTS}/runs"):  # the journal, per-rank keys, TensorBoard's
                shutil.rmtree(out / name, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        write_json(
            info_path,
            {
                "config": cfg.to_dict(),
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
