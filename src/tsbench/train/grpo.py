"""GRPO post-training with the AnomalyXL generator in the loop (timerlm-anomalyxl §4.1).

Read top to bottom: the config (defaults = the paper's run), then `train_grpo`, whose step loop is

    fresh tasks from the generator -> G rollouts per task through the harness with the live policy
    -> penalised rewards -> group advantages (zero-variance groups dropped)
    -> token-level clipped surrogate on generated tokens -> optimizer step -> metrics, checkpoint

followed by the pieces it calls (model set-up, the update, checkpoints, metrics).

Sizes: `batch_size` is the number of ROLLOUTS per step; tasks per step = batch_size // group_size
(the paper: 128 rollouts = 16 tasks x G 8). Several GPUs: launch with `accelerate launch`; each
process runs whole groups (tasks are dealt out by rank) and DDP averages the gradients.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import math
import os
import random
import shutil
import time
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.core.errors import UserError
from tsbench.train import rewards as rw
from tsbench.train.advantages import ADVANTAGES, group_advantages
from tsbench.train.curriculum import CURRICULUM_FRACTION, generator_config, sample_tasks
from tsbench.train.loss import LOSS_NORMS, clipped_surrogate, gather_logprobs, token_weight

log = logging.getLogger(__name__)

REWARDS = ("anomalyxl", "composite")
ENGINES = ("hf", "vllm")
CHECKPOINTS = "checkpoints"
METRICS = "metrics.parquet"
TRAIN_JSON = "train.json"
ROLLOUTS = "rollouts"
TRAINER_STATE = "trainer_state.pt"
# Settings that must not change when a run is resumed (steps may grow; logging and I/O may change).
RESUME_KEYS = (
    "model", "lora", "full", "group_size", "batch_size", "max_turns", "max_seq_len", "max_new_tokens", "temperature",
    "advantage", "kl_beta", "reward", "categories", "lengths", "preset", "seed", "harness", "lambda_tok",
    "lambda_fail", "clip_eps", "loss_norm",
)

ProgressFn = Callable[[int, int, dict], None]  # (step, total steps, that step's metrics)


# =============================================================================================
# Config
# =============================================================================================
@dataclass
class GRPOConfig:
    """One field per `tsbench train-grpo` flag; defaults are the paper's run (Qwen3.5-4B, full parameters)."""

    model: str = ""  # local/smollm2-135m, local/<dir>, a directory, or a hub id (Qwen/Qwen3.5-4B)
    lora: int | None = None  # LoRA rank; None trains every parameter
    full: bool = False  # say so explicitly (the default when lora is None)
    lora_alpha: int | None = None  # default 2 * rank
    lora_dropout: float = 0.0
    lora_target: str = "all-linear"
    # the run
    steps: int = 300
    group_size: int = 8  # G rollouts per task
    batch_size: int = 128  # rollouts per step (tasks per step = batch_size // group_size)
    max_turns: int = 15
    max_seq_len: int = 65536  # prompt + every turn of one episode, in tokens
    max_new_tokens: int = 4096  # per reply
    temperature: float = 1.0
    harness: str = "rlm"
    # optimisation
    lr: float = 1e-6
    weight_decay: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    advantage: str = "dr-grpo"  # or "grpo" (TimeMaster: divide by the group std)
    kl_beta: float = 0.0  # TimeMaster: 0.001
    clip_eps: float = 0.2
    loss_norm: str = "token"  # or "sequence" (TimeMaster eq. 7)
    updates_per_step: int = 1  # optimizer steps per batch of rollouts (1: strictly on-policy)
    micro_batch_tokens: int = 65536  # padded tokens per forward/backward
    gradient_checkpointing: bool | None = None  # None: on for GPU, off for CPU
    # rewards
    reward: str = "anomalyxl"  # or "composite" (TimeMaster)
    judge: str | None = None  # model string for the composite's soft reward
    composite_weights: tuple[float, float, float] = rw.COMPOSITE_WEIGHTS
    lambda_tok: float = rw.LAMBDA_TOK
    lambda_fail: float = rw.LAMBDA_FAIL
    # tasks
    categories: tuple[str, ...] = lb.PRECISE_CATEGORIES
    lengths: tuple[int, ...] | None = None  # None: the preset's grid (paper: 16k-131k single, 32k/131k multi)
    preset: str = "paper"  # or "small" (L 1024/2048) for tests and demos
    curriculum_fraction: float = CURRICULUM_FRACTION
    # rollouts
    rollout_engine: str = "hf"  # or "vllm"
    rollout_workers: int = 32  # episodes in flight (each has its own kernel)
    cell_timeout_s: float = 300.0
    memory_gib: float = 4.0
    vllm_gpu_memory: float = 0.35
    vllm_sleep: bool = False  # free vLLM's memory during the update (slower, for tight GPUs)
    # I/O
    out: str | None = None  # default runs/grpo__<model>
    resume: bool = False
    save_every: int = 50
    keep_checkpoints: int = 2
    log_rollouts: bool = True
    seed: int = 0
    device: str | None = None  # default cuda if available
    dtype: str | None = None  # weights' dtype; default float32 (bfloat16 for a LoRA's frozen base on GPU)

    @property
    def tasks_per_step(self) -> int:
        return self.batch_size // self.group_size

    @property
    def use_lora(self) -> bool:
        return self.lora is not None

    def run_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        slug = self.model.replace("local/", "").replace("/", "_").replace(":", "_")
        return Path("runs") / f"grpo__{slug}"

    def validate(self) -> None:
        problems = []
        if not self.model:
            problems.append("--model is required")
        if self.lora is not None and self.full:
            problems.append("give --lora R or --full, not both")
        if self.lora is not None and self.lora < 1:
            problems.append("--lora takes a rank >= 1")
        if self.group_size < 2:
            problems.append("--group-size must be >= 2 (advantages are relative to the group)")
        if self.batch_size < self.group_size or self.batch_size % self.group_size:
            problems.append(f"--batch-size ({self.batch_size} rollouts) must be a multiple of --group-size ({self.group_size})")
        if self.steps < 1 or self.max_turns < 1 or self.max_new_tokens < 1 or self.max_seq_len < 2:
            problems.append("--steps, --max-turns, --max-new-tokens must be >= 1 and --max-seq-len >= 2")
        if self.advantage not in ADVANTAGES:
            problems.append(f"--advantage must be one of {', '.join(ADVANTAGES)}")
        if self.reward not in REWARDS:
            problems.append(f"--reward must be one of {', '.join(REWARDS)}")
        if self.reward == "composite" and self.composite_weights[2] > 0 and not self.judge:
            problems.append("--reward composite with a soft weight needs --judge <model>")
        if self.rollout_engine not in ENGINES:
            problems.append(f"--rollout-engine must be one of {', '.join(ENGINES)}")
        if self.loss_norm not in LOSS_NORMS:
            problems.append(f"loss_norm must be one of {', '.join(LOSS_NORMS)}")
        unknown = [c for c in self.categories if c not in lb.ALL_CATEGORIES]
        if unknown or not self.categories:
            problems.append(f"unknown --categories {', '.join(unknown) or '(none given)'}")
        if any(c in lb.MCQ_CATEGORIES for c in self.categories):
            problems.append("train-grpo draws precise (Localize) tasks; MCQ templates are not generated per step")
        if self.lengths is not None and (not self.lengths or min(self.lengths) < 16):
            problems.append("--lengths must be series lengths >= 16")
        if self.preset not in ("paper", "small"):
            problems.append("--preset must be paper or small")
        if not 0.0 <= self.curriculum_fraction <= 1.0:
            problems.append("curriculum_fraction must lie in [0, 1]")
        if not 0 < self.clip_eps < 1 or self.kl_beta < 0 or self.lr <= 0 or self.updates_per_step < 1:
            problems.append("need 0 < clip_eps < 1, kl_beta >= 0, lr > 0 and updates_per_step >= 1")
        if self.save_every < 1 or self.keep_checkpoints < 1:
            problems.append("save_every and keep_checkpoints must be >= 1")
        from tsbench.harness import HARNESSES

        if self.harness not in HARNESSES:
            problems.append(f"--harness must be one of {', '.join(HARNESSES)}")
        if problems:
            raise UserError("; ".join(problems))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def load_grpo_config(path: str | Path, **overrides: Any) -> GRPOConfig:
    """A GRPOConfig from a TOML file (top level or a [grpo] table); non-None overrides win."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    data = dict(data.get("grpo", data))
    data.update({k: v for k, v in overrides.items() if v is not None})
    return config_from_dict(data, where=str(path))


def config_from_dict(data: dict, where: str = "config") -> GRPOConfig:
    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"{where}: unknown setting(s) {', '.join(unknown)}")
    for key in ("categories", "lengths", "composite_weights"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    if isinstance(data.get("categories"), str):
        data["categories"] = tuple(c.strip() for c in data["categories"].split(",") if c.strip())
    return GRPOConfig(**data)


# =============================================================================================
# The trainer
# =============================================================================================
def train_grpo(cfg: GRPOConfig, progress: ProgressFn | None = None) -> Path:
    """Train; returns the run dir (checkpoints/step-NNNNNN/ in Hugging Face format, `final` -> the last)."""
    from accelerate import Accelerator

    from tsbench import results as schema
    from tsbench.harness import HarnessConfig, get_harness
    from tsbench.train.policy import (BatchingEngine, ChatTokens, load_policy, load_tokenizer, resolve_model)
    from tsbench.train.rollouts import RolloutSettings, collect_rollouts, rollout_record

    cfg.validate()
    out = cfg.run_dir()
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.startswith("cuda")
    accelerator = Accelerator(cpu=not on_gpu, mixed_precision="bf16" if on_gpu else "no")
    rank, world = accelerator.process_index, accelerator.num_processes
    checkpoint = prepare_run_dir(cfg, out, accelerator.is_main_process)
    seed_everything(cfg.seed + rank)

    # -- the policy, its optimizer and (when KL is on) a frozen reference -------------------------
    source = resolve_model(cfg.model)
    tokenizer = load_tokenizer(source, checkpoint)
    weights_dtype = _weights_dtype(cfg, on_gpu)
    model = load_policy(source, lora_rank=cfg.lora, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                        lora_target=cfg.lora_target, dtype=weights_dtype, checkpoint=checkpoint)
    if cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else on_gpu:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    reference = None
    if cfg.kl_beta > 0 and not cfg.use_lora:  # a LoRA's reference is its base with the adapter switched off
        reference = copy.deepcopy(model).eval().requires_grad_(False).to(accelerator.device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / (cfg.warmup_steps + 1)))
    model, optimizer = accelerator.prepare(model, optimizer)
    policy = accelerator.unwrap_model(model)
    start_step = restore_checkpoint(checkpoint, optimizer, scheduler, rank) if checkpoint else 0

    # -- rollouts: the harness, an engine over the live policy, the reward settings ----------------
    engine = make_engine(cfg, source, policy, tokenizer, accelerator.device)
    batcher = BatchingEngine(engine)
    chat = ChatTokens(tokenizer)
    harness_cfg = HarnessConfig(
        max_turns=cfg.max_turns, max_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
        cell_timeout_s=cfg.cell_timeout_s, memory_gib=cfg.memory_gib,
    )
    judge = None
    if cfg.reward == "composite" and cfg.judge:
        from tsbench.models.registry import get_model

        judge = get_model(cfg.judge)
    settings = RolloutSettings(
        harness=get_harness(cfg.harness), harness_config=harness_cfg, model_name=cfg.model,
        max_new_tokens=cfg.max_new_tokens, max_seq_len=cfg.max_seq_len, temperature=cfg.temperature,
        workers=cfg.rollout_workers, seed=cfg.seed, reward=cfg.reward, composite_weights=cfg.composite_weights,
        judge=judge,
    )
    metrics_log = MetricsLog(out, start_step, enabled=accelerator.is_main_process)
    journal = schema.Journal(out / ROLLOUTS) if cfg.log_rollouts and accelerator.is_main_process else None

    try:
        for step in range(start_step + 1, cfg.steps + 1):
            step_started = time.perf_counter()

            # 1. a fresh batch of tasks from the generator (this rank's share of whole groups)
            gen = generator_config(step, cfg.steps, fraction=cfg.curriculum_fraction, preset_name=cfg.preset,
                                   seed=cfg.seed, lengths=cfg.lengths)
            plans = sample_tasks(gen, tuple(cfg.categories), step, cfg.tasks_per_step, cfg.seed)[rank::world]

            # 2. G rollouts per task with the current policy
            policy.eval()
            engine.sync_weights(policy)
            groups = collect_rollouts(plans, cfg.group_size, batcher, chat, settings, step=step)
            if hasattr(engine, "after_rollouts"):
                engine.after_rollouts()
            policy.train()
            rollout_s = time.perf_counter() - step_started

            # 3. rewards and group advantages; groups with zero reward variance are dropped
            dropped_groups = 0
            for group in groups:
                assign_rewards(group, cfg)
                if any(r.infra_failure for r in group):
                    adv, dropped = [0.0] * len(group), True
                else:
                    result = group_advantages([r.reward for r in group], cfg.advantage)
                    adv, dropped = result.advantages, result.dropped
                dropped_groups += dropped
                for r, a in zip(group, adv):
                    r.advantage, r.dropped = a, dropped
            samples = [Sample(r.ids, r.mask, r.advantage) for g in groups for r in g if not r.dropped and any(r.mask)]

            # 4. one update of the policy on the generated tokens
            update_started = time.perf_counter()
            stats = update_policy(accelerator, model, reference, optimizer, samples, cfg, tokenizer.pad_token_id)
            with warnings.catch_warnings():  # a step whose groups were all dropped never calls optimizer.step()
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                scheduler.step()
            update_s = time.perf_counter() - update_started

            # 5. metrics, rollout log, checkpoint
            rollouts = [r for g in groups for r in g]
            row = step_metrics(step, rollouts, dropped_groups, len(groups), stats, gen, accelerator)
            row.update(lr=scheduler.get_last_lr()[0], rollout_s=rollout_s, update_s=update_s,
                       step_s=time.perf_counter() - step_started)
            if cfg.log_rollouts:
                records = [rollout_record(r, step=step, model=cfg.model, harness=cfg.harness) for r in rollouts]
                if world > 1:
                    from accelerate.utils import gather_object

                    records = gather_object(records)
                for record in records if journal is not None else []:
                    journal.append(record)
            metrics_log.add(row)
            if step % cfg.save_every == 0 or step == cfg.steps:
                save_checkpoint(out, step, accelerator, policy, tokenizer, optimizer, scheduler, source, cfg)
            if progress is not None and accelerator.is_main_process:
                progress(step, cfg.steps, row)
    finally:
        if journal is not None:
            journal.close()
            schema.consolidate(out / ROLLOUTS)
        metrics_log.close()
        batcher.engine.close()
    return out


# =============================================================================================
# Rewards for one group
# =============================================================================================
def assign_rewards(group: list, cfg: GRPOConfig) -> None:
    """R_i on every rollout of a group: penalised task score, or TimeMaster's composite as is."""
    if cfg.reward == "composite":
        for r in group:
            r.reward = r.composite.reward if r.composite is not None else 0.0
        return
    parts = rw.penalised_rewards([r.score for r in group], [r.output_tokens for r in group],
                                 [r.forced_final for r in group], lambda_tok=cfg.lambda_tok, lambda_fail=cfg.lambda_fail)
    for r, p in zip(group, parts):
        r.reward, r.kappa, r.token_penalty, r.fail_penalty = p.reward, p.kappa, p.token_penalty, p.fail_penalty


# =============================================================================================
# The update
# =============================================================================================
@dataclass
class Sample:
    ids: list[int]
    mask: list[int]  # 1 on tokens the model generated
    advantage: float

    @property
    def n_generated(self) -> int:
        return sum(self.mask)


def update_policy(accelerator: Any, model: Any, reference: Any, optimizer: Any, samples: list[Sample],
                  cfg: GRPOConfig, pad_id: int | None) -> dict[str, float]:
    """`updates_per_step` optimizer steps over the kept rollouts, each on an equal share, with
    micro-batches of at most `micro_batch_tokens` padded tokens accumulated into one gradient."""
    pad_id = 0 if pad_id is None else pad_id
    stats = {"loss": 0.0, "policy_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "grad_norm": 0.0, "trained_tokens": 0.0}
    totals = _global_sum(accelerator, [sum(s.n_generated for s in samples), len(samples)])
    if totals[0] == 0:
        return stats  # every group was dropped everywhere: nothing to learn from this step
    stats["trained_tokens"] = float(totals[0])
    order = list(range(len(samples)))
    if cfg.updates_per_step > 1:
        random.Random(cfg.seed + len(samples)).shuffle(order)
    shares = [[samples[i] for i in order[k::cfg.updates_per_step]] for k in range(cfg.updates_per_step)]
    old: dict[int, torch.Tensor] = {}
    if cfg.updates_per_step > 1:  # later updates are off-policy: keep the sampling policy's log-probs
        with torch.no_grad():
            for share in shares:
                for batch in micro_batches(share, cfg.micro_batch_tokens, pad_id, accelerator.device):
                    logp = generated_logprobs(model, batch, cfg.temperature)
                    for sample, piece in zip(batch.samples, logp.split(batch.counts)):
                        old[id(sample)] = piece.detach()
    for share in shares:
        n_tokens, n_seqs = _global_sum(accelerator, [sum(s.n_generated for s in share), len(share)])
        batches = micro_batches(share, cfg.micro_batch_tokens, pad_id, accelerator.device) or \
            [dummy_batch(pad_id, accelerator.device)]  # a rank with nothing still joins the gradient sync
        for k, batch in enumerate(batches):
            sync = contextlib.nullcontext() if k == len(batches) - 1 else accelerator.no_sync(model)
            with sync:
                logp = generated_logprobs(model, batch, cfg.temperature)
                old_logp = torch.cat([old[id(s)] for s in batch.samples]) if old and batch.samples else logp.detach()
                weights = torch.cat([
                    torch.full((c,), token_weight(c, total_tokens=n_tokens, n_sequences=n_seqs, norm=cfg.loss_norm))
                    for c in batch.counts]).to(logp.device) if batch.samples else torch.zeros_like(logp)
                advantages = torch.cat([torch.full((c,), s.advantage) for s, c in zip(batch.samples, batch.counts)]
                                       ).to(logp.device) if batch.samples else torch.zeros_like(logp)
                ref_logp = reference_logprobs(accelerator, model, reference, batch, cfg) if cfg.kl_beta > 0 else None
                parts = clipped_surrogate(logp, old_logp, advantages, weights, clip_eps=cfg.clip_eps,
                                          ref_logprobs=ref_logp, kl_beta=cfg.kl_beta)
                # DDP averages gradients over processes; the weights already divide by the global count
                accelerator.backward(parts.loss * accelerator.num_processes)
            stats["loss"] += float(parts.loss.detach())
            stats["policy_loss"] += parts.policy_loss
            stats["kl"] += parts.kl
            stats["clip_frac"] += parts.clip_frac
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = accelerator.clip_grad_norm_(params, cfg.max_grad_norm)
        stats["grad_norm"] = float(grad_norm) if grad_norm is not None else 0.0
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    scale = 1.0 / cfg.updates_per_step  # each share's weights sum to one: report the mean over shares
    for key in ("loss", "policy_loss", "kl", "clip_frac"):
        stats[key] = _global_sum(accelerator, [stats[key]], float)[0] * scale
    return stats


@dataclass
class MicroBatch:
    ids: torch.Tensor  # (B, T) right-padded
    attention: torch.Tensor  # (B, T)
    targets: torch.Tensor  # (B, T) bool: the token at t was generated (its log-prob comes from position t - 1)
    samples: list[Sample] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # generated tokens per sample, in order


def micro_batches(samples: list[Sample], max_tokens: int, pad_id: int, device: Any) -> list[MicroBatch]:
    """Longest first, as many per batch as fit in max_tokens padded tokens (always at least one)."""
    ordered = sorted(samples, key=lambda s: len(s.ids), reverse=True)
    groups: list[list[Sample]] = []
    for sample in ordered:
        if groups and (len(groups[-1]) + 1) * len(groups[-1][0].ids) <= max_tokens:
            groups[-1].append(sample)
        else:
            groups.append([sample])
    return [_pack(group, pad_id, device) for group in groups]


def _pack(group: list[Sample], pad_id: int, device: Any) -> MicroBatch:
    width = max(len(s.ids) for s in group)
    ids = torch.full((len(group), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(group), width), dtype=torch.long)
    targets = torch.zeros((len(group), width), dtype=torch.bool)
    for row, s in enumerate(group):
        ids[row, : len(s.ids)] = torch.tensor(s.ids, dtype=torch.long)
        attention[row, : len(s.ids)] = 1
        targets[row, : len(s.mask)] = torch.tensor(s.mask, dtype=torch.bool)
    targets[:, 0] = False  # nothing predicts the first token
    counts = [int(targets[row].sum()) for row in range(len(group))]
    return MicroBatch(ids.to(device), attention.to(device), targets.to(device), group, counts)


def dummy_batch(pad_id: int, device: Any) -> MicroBatch:
    ids = torch.full((1, 2), pad_id, dtype=torch.long, device=device)
    targets = torch.tensor([[False, True]], device=device)
    return MicroBatch(ids, torch.ones_like(ids), targets, [], [1])


_HEAD_CHECKED: set[int] = set()


def generated_logprobs(model: Any, batch: MicroBatch, temperature: float, chunk: int = 4096) -> torch.Tensor:
    """log pi(token) for every generated token of the batch, flat in (row, position) order.

    The model runs once with logits for the last position only; the LM head is then applied to the
    final hidden states at the positions that predict generated tokens, in checkpointed chunks, so
    a 64k-token episode never materialises a (T x vocab) logits tensor.
    """
    out = model(input_ids=batch.ids, attention_mask=batch.attention, output_hidden_states=True,
                logits_to_keep=1, use_cache=False)
    hidden = out.hidden_states[-1]
    head = _unwrap(model).get_output_embeddings()
    if id(head) not in _HEAD_CHECKED:  # the last hidden state must be the one the head reads
        with torch.no_grad():
            last = batch.attention[0].sum() - 1
            direct = head(hidden[0, last].to(head.weight.dtype)).float()
            given = out.logits[0, -1].float()
            if last == batch.ids.shape[1] - 1 and (direct - given).abs().max() > 0.05 * given.abs().max() + 1e-3:
                raise RuntimeError("this model's last hidden state is not what its LM head reads; "
                                   "generated_logprobs cannot score it")
        _HEAD_CHECKED.add(id(head))
    shifted = batch.targets[:, 1:]
    selected = hidden[:, :-1][shifted]  # (N, H): the position before each generated token
    targets = batch.ids[:, 1:][shifted]
    pieces = []
    for start in range(0, selected.shape[0], chunk):
        pieces.append(torch.utils.checkpoint.checkpoint(
            _head_logprobs, head, selected[start:start + chunk], targets[start:start + chunk], temperature,
            use_reentrant=False))
    return torch.cat(pieces) if pieces else selected.new_zeros((0,), dtype=torch.float32)


def _head_logprobs(head: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    return gather_logprobs(head(hidden.to(head.weight.dtype)), targets, temperature)


def reference_logprobs(accelerator: Any, model: Any, reference: Any, batch: MicroBatch, cfg: GRPOConfig) -> torch.Tensor:
    with torch.no_grad():
        if reference is not None:
            return generated_logprobs(reference, batch, cfg.temperature)
        with _unwrap(model).disable_adapter():
            return generated_logprobs(model, batch, cfg.temperature)


def _unwrap(model: Any) -> Any:
    return model.module if hasattr(model, "module") else model


def _global_sum(accelerator: Any, values: list, kind: type = int) -> list:
    if accelerator.num_processes == 1:
        return [kind(v) for v in values]
    tensor = torch.tensor([float(v) for v in values], device=accelerator.device)
    return [kind(v) for v in accelerator.reduce(tensor, reduction="sum").tolist()]


# =============================================================================================
# Set-up helpers
# =============================================================================================
def _weights_dtype(cfg: GRPOConfig, on_gpu: bool) -> torch.dtype:
    if cfg.dtype:
        value = getattr(torch, cfg.dtype, None)
        if not isinstance(value, torch.dtype):
            raise UserError(f"unknown dtype {cfg.dtype!r}")
        return value
    return torch.bfloat16 if (on_gpu and cfg.use_lora) else torch.float32


def make_engine(cfg: GRPOConfig, source: Any, policy: Any, tokenizer: Any, device: Any) -> Any:
    from tsbench.train.policy import HFEngine, VLLMEngine

    if cfg.rollout_engine == "vllm":
        if not str(device).startswith("cuda"):
            raise UserError("--rollout-engine vllm needs a GPU; use --rollout-engine hf on CPU")
        return VLLMEngine(source.weights, source.weights, max_seq_len=cfg.max_seq_len,
                          gpu_memory_utilization=cfg.vllm_gpu_memory, seed=cfg.seed, sleep=cfg.vllm_sleep)
    autocast = torch.bfloat16 if str(device).startswith("cuda") else None
    return HFEngine(policy, tokenizer, device=str(device), autocast_dtype=autocast)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def prepare_run_dir(cfg: GRPOConfig, out: Path, main: bool) -> Path | None:
    """The checkpoint to resume from (None for a fresh start); refuses to mix runs."""
    existing = latest_checkpoint(out)
    info_path = out / TRAIN_JSON
    if existing is not None and not cfg.resume:
        raise UserError(f"{out} already holds a run (last checkpoint {existing.name}); "
                        "pass --resume to continue it or choose another --out")
    if cfg.resume and info_path.exists():
        previous = json.loads(info_path.read_text()).get("config", {})
        current = json.loads(json.dumps(cfg.to_dict()))  # tuples as lists, like the file
        changed = [k for k in RESUME_KEYS if previous.get(k) != current.get(k)]
        if changed:
            raise UserError(f"{out} was trained with different {', '.join(changed)}; resume with the same "
                            "settings or choose another --out")
    if cfg.resume and existing is None:
        log.warning("--resume: no checkpoint in %s yet; starting from step 1", out)
    if main and existing is None:  # a fresh start: whatever an aborted run left here goes
        (out / METRICS).unlink(missing_ok=True)
        shutil.rmtree(out / ROLLOUTS, ignore_errors=True)
        shutil.rmtree(out / "tensorboard", ignore_errors=True)
    if main:
        from tsbench.core.provenance import git_commit, versions, write_json

        out.mkdir(parents=True, exist_ok=True)
        info = {"config": cfg.to_dict(), "versions": versions(("torch", "transformers", "peft", "accelerate")),
                "git_commit": git_commit(), "resumed_from": existing.name if existing else None}
        write_json(info_path, info)
    return existing


# =============================================================================================
# Checkpoints: Hugging Face format + trainer state
# =============================================================================================
def checkpoint_dirs(out: Path) -> list[Path]:
    root = out / CHECKPOINTS
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*") if p.is_dir() and (p / TRAINER_STATE).is_file())


def latest_checkpoint(out: Path) -> Path | None:
    found = checkpoint_dirs(out)
    return found[-1] if found else None


def save_checkpoint(out: Path, step: int, accelerator: Any, policy: Any, tokenizer: Any, optimizer: Any,
                    scheduler: Any, source: Any, cfg: GRPOConfig) -> Path:
    """checkpoints/step-NNNNNN/: the adapter (or full weights) + tokenizer, loadable as `local/<dir>`,
    and trainer_state.pt / rng-<rank>.pt for --resume. Written to a temporary name, then renamed."""
    from tsbench.train.policy import saved_base_record

    final = out / CHECKPOINTS / f"step-{step:06d}"
    staging = final.with_name(f".{final.name}.partial")
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        policy.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
        adapter_config = staging / "adapter_config.json"
        if adapter_config.is_file():  # name a base that `local/<dir>` can find offline
            data = json.loads(adapter_config.read_text())
            data["base_model_name_or_path"] = saved_base_record(source)
            adapter_config.write_text(json.dumps(data, indent=2))
        torch.save({"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "config": cfg.to_dict()}, staging / TRAINER_STATE)
    accelerator.wait_for_everyone()
    torch.save(rng_state(), staging / f"rng-{accelerator.process_index}.pt")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        link = out / "final"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path(CHECKPOINTS) / final.name)
        for old in checkpoint_dirs(out)[: -cfg.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def restore_checkpoint(checkpoint: Path, optimizer: Any, scheduler: Any, rank: int) -> int:
    """Optimizer, scheduler and RNG from a checkpoint (its weights were loaded with the model); the step."""
    state = torch.load(checkpoint / TRAINER_STATE, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rng_file = checkpoint / f"rng-{rank}.pt"
    if rng_file.is_file():
        set_rng_state(torch.load(rng_file, weights_only=False))
    return int(state["step"])


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# =============================================================================================
# Metrics: runs/<name>/metrics.parquet (+ TensorBoard when it is installed)
# =============================================================================================
def step_metrics(step: int, rollouts: list, dropped_groups: int, n_groups: int, stats: dict, gen: Any,
                 accelerator: Any) -> dict[str, float]:
    from accelerate.utils import gather_object

    rows = [{"score": r.score, "reward": r.reward, "token_penalty": r.token_penalty, "fail_penalty": r.fail_penalty,
             "turns": r.turns, "tokens": r.output_tokens, "forced": r.forced_final, "infra": r.infra_failure,
             "composite": None if r.composite is None else (r.composite.format, r.composite.hard, r.composite.soft)}
            for r in rollouts]
    if accelerator.num_processes > 1:
        rows = gather_object(rows)
        dropped_groups, n_groups = _global_sum(accelerator, [dropped_groups, n_groups])
    ok = [r for r in rows if not r["infra"]] or [{"score": 0.0, "reward": 0.0, "token_penalty": 0.0,
                                                  "fail_penalty": 0.0, "turns": 0, "tokens": 0, "forced": False}]

    def mean(key: str, source: list = ok) -> float:
        return float(np.mean([float(r[key]) for r in source]))

    row = {
        "step": step, "groups": n_groups, "rollouts": len(rows), "mean_score": mean("score"),
        "mean_reward": mean("reward"), "token_penalty": mean("token_penalty"), "fail_penalty": mean("fail_penalty"),
        "mean_turns": mean("turns"), "mean_tokens": mean("tokens"), "max_tokens": float(max(r["tokens"] for r in ok)),
        "forced_final_rate": mean("forced"), "infra_failures": sum(r["infra"] for r in rows),
        "dropped_groups": dropped_groups, "p_present": gen.p_present, "min_k": gen.min_k, **stats,
    }
    parts = [r["composite"] for r in rows if r.get("composite")]
    if parts:
        row.update(format_reward=float(np.mean([p[0] for p in parts])), hard_reward=float(np.mean([p[1] for p in parts])),
                   soft_reward=float(np.mean([p[2] for p in parts])))
    return row


class MetricsLog:
    """One row per step, rewritten to metrics.parquet after every step; a resume drops rows past its step."""

    def __init__(self, out: Path, start_step: int, *, enabled: bool = True):
        self.path = out / METRICS
        self.enabled = enabled
        self.rows: list[dict] = []
        self.writer = None
        if not enabled:
            return
        if self.path.exists():
            import pandas as pd

            previous = pd.read_parquet(self.path)
            self.rows = [r for r in previous.to_dict("records") if r["step"] <= start_step]
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tensorboard"))
        except ImportError:
            log.warning("tensorboard is not installed: no TensorBoard logs (metrics.parquet has every number)")

    def add(self, row: dict) -> None:
        if not self.enabled:
            return
        import pandas as pd

        self.rows.append(row)
        tmp = self.path.with_suffix(".parquet.tmp")
        pd.DataFrame(self.rows).to_parquet(tmp, index=False)
        tmp.replace(self.path)
        if self.writer is not None:
            for key, value in row.items():
                if key != "step" and isinstance(value, (int, float)) and math.isfinite(value):
                    self.writer.add_scalar(f"grpo/{key}", value, row["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class RichProgress:
    """A ready-made `progress` callback: a rich bar with the step's main numbers."""

    def __init__(self, console: Any = None):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]train-grpo"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=console)
        self.task = None

    def __enter__(self) -> "RichProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def __call__(self, step: int, total: int, row: dict) -> None:
        if self.task is None:
            self.task = self.progress.add_task("grpo", total=total, info="")
        info = (f"score={row['mean_score']:.3f} reward={row['mean_reward']:.3f} loss={row['loss']:.4f} "
                f"forced={row['forced_final_rate']:.2f} dropped={row['dropped_groups']}/{row['groups']} "
                f"{row['step_s']:.0f}s/step")
        self.progress.update(self.task, completed=step, info=info)
