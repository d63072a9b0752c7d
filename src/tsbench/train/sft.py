"""`tsbench sft-baseline`: supervised fine-tuning of a language model, LoRA (default) or full.

Two formats (see sft_data.py for how examples are built and masked):

- `single-pass-text`: the model learns to answer from the serialized series, with the single-pass-text
  harness's own prompt, in one regime's answer format; trained on the AnomalyXL train split and
  validated after every epoch on the val split (paper Appendix C).
- `rlm-trajectories`: SFT on finished RLM episodes from eval results that scored at least
  `min_score`; observation and prompt tokens are masked. This is the warm start before `train-grpo`
  (TimeMaster §3.4).

After each epoch: validation loss (teacher forced) and the validation primary metric (greedy
generation through the same `LocalHFModel.generate` that `tsbench eval` uses, scored with the
benchmark's scorers: MCQ accuracy for coarse rows, the continuous primary score for precise ones).
For rlm-trajectories the validation rows are held-out episodes (val-split ones when the results hold
train-split ones too, else a seeded tenth of the rows) and the generated reply is the final answer,
given the episode's own code turns and sandbox observations as context: the sandbox is not re-run.

Early stopping watches the validation loss (patience); the checkpoint kept in the output dir is the
epoch with the highest primary metric (ties: lower loss). The output dir loads as `local/<dir>`: a PEFT adapter whose base is `smollm2-135m` or an absolute local directory, or a
full model; beside it `run.json` (config, data hashes, versions, commit, results), `metrics.parquet`
(one row per epoch) and `steps.parquet` (one row per optimizer step).

Optimisation is a plain loop: AdamW (weight decay on matrices only), gradient-norm clipping, linear
warmup over `warmup` of all steps then linear decay to zero (the Hugging Face Trainer's default
schedule), token-mean cross-entropy over the trained tokens of each batch, with logits computed only
at the positions that predict a trained token (`causal_lm_loss`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tsbench.tasks.anomalyxl.rows import iter_rows, read_index
from tsbench.core.errors import UserError
from tsbench.core.provenance import TRACKED_PACKAGES, git_commit, versions, write_json
from tsbench.train import sft_data as sd

SINGLE_PASS = "single-pass-text"
RLM_TRAJECTORIES = "rlm-trajectories"
FORMATS = (SINGLE_PASS, RLM_TRAJECTORIES)
DEFAULT_DATA = "data/anomalyxl/seed42"
RUN_JSON = "run.json"
METRICS = "metrics.parquet"
STEPS = "steps.parquet"
STAGING = ".checkpoint-staging"

ProgressFn = Callable[[str, dict], None]  # (event, fields); events listed in RichSFTProgress


@dataclass
class SFTConfig:
    """Defaults are the paper's (timerlm-anomalyxl Appendix C) where it gives one."""

    model: str  # local/smollm2-135m | local/<dir> (HF model or PEFT adapter) | a path | a Hugging Face id
    format: str = SINGLE_PASS  # single-pass-text | rlm-trajectories
    # single-pass-text: one dataset seed dir holding {train,val}-<regime>.parquet (default data/anomalyxl/seed42);
    # rlm-trajectories: one or more eval run dirs (results/<run>).
    data: list[str] = field(default_factory=list)
    # precise | coarse (| both, rlm-trajectories only). None: precise for single-pass-text, both for rlm-trajectories.
    regime: str | None = None
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target: str = "q_proj,v_proj"  # LoRA target modules, comma-separated
    full: bool = False  # full fine-tuning instead of LoRA
    epochs: int = 5
    lr: float = 1e-4
    weight_decay: float = 0.01
    grad_clip: float = 1.0  # max gradient norm; 0 disables clipping
    warmup: float = 0.03  # fraction of all optimizer steps
    batch_size: int = 1
    patience: int = 3  # epochs without a lower val loss before stopping
    val_rows: int = 500  # validation rows (single-pass: of the regime's val split; rlm: held-out episodes)
    train_rows: int | None = None  # None: all (paper: ~5,000); else spread round-robin over categories
    # rlm-trajectories: keep episodes scoring at least this. 0.5 keeps MCQ hits and precise answers
    # that are at least half right (IoU 0.5, magnitude within 25 %, ...), and drops the rest.
    min_score: float = 0.5
    include_test_split: bool = False  # rlm-trajectories: allow episodes on test rows (contaminates the benchmark)
    max_seq_len: int | None = None  # None: the model's context (max_position_embeddings); longer examples are dropped
    # single-pass-text: characters of serialized values in the prompt. None: the largest budget whose
    # prompts plus the answer fit max_seq_len (8192 tokens for SmolLM2 gives about 7,000 characters).
    # Evaluate the trained model with the same value (run.json: eval_hint).
    text_budget_chars: int | None = None
    val_max_new_tokens: int = 128  # generation cap when validating (answers are short JSON objects)
    out: str | None = None  # default models/sft-<model>-<format>-<regime>
    seed: int = 0  # LoRA init, shuffling, held-out trajectories
    device: str | None = None  # default cuda when available, else cpu
    dtype: str | None = None  # default: float32 for --full and on CPU, bfloat16 (float16) for LoRA on GPU
    gradient_checkpointing: bool = False
    overwrite: bool = False  # replace an existing output dir

    def to_dict(self) -> dict:
        return asdict(self)


def load_sft_config(path: str | Path, **overrides: Any) -> SFTConfig:
    """An SFTConfig from the `[sft]` table of a TOML file; overrides that are not None win."""
    import tomllib

    path = Path(path)
    try:
        table = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    table = dict(table.get("sft", table))
    table.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(SFTConfig)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UserError(f"{path}: unknown sft setting(s) {', '.join(unknown)}")
    if "model" not in table:
        raise UserError(f"{path}: the sft table names no model")
    return SFTConfig(**table)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- settings -------------------------------------------------------------------------------------

def _checked(cfg: SFTConfig) -> SFTConfig:
    """A copy with defaults filled in; bad values are one-line UserErrors."""
    cfg = SFTConfig(**cfg.to_dict())
    if cfg.format not in FORMATS:
        raise UserError(f"--format must be {' or '.join(FORMATS)} (got {cfg.format})")
    cfg.data = [cfg.data] if isinstance(cfg.data, (str, Path)) else [str(d) for d in cfg.data]
    cfg.regime = cfg.regime or ("precise" if cfg.format == SINGLE_PASS else "both")
    allowed = ("precise", "coarse") if cfg.format == SINGLE_PASS else ("precise", "coarse", "both")
    if cfg.regime not in allowed:
        raise UserError(f"--regime must be {', '.join(allowed)} for {cfg.format} (got {cfg.regime})")
    if cfg.format == RLM_TRAJECTORIES and not cfg.data:
        raise UserError("--format rlm-trajectories needs --data results/<run> (eval results with RLM transcripts)")
    if cfg.format == SINGLE_PASS and len(cfg.data) > 1:
        raise UserError("--format single-pass-text takes one --data dir (a dataset seed dir)")
    checks = [
        (cfg.epochs >= 1, "--epochs must be >= 1"), (cfg.batch_size >= 1, "--batch-size must be >= 1"),
        (cfg.lr >= 0, "--lr must be >= 0"), (0 <= cfg.warmup <= 1, "--warmup must be in [0, 1]"),
        (cfg.patience >= 1, "--patience must be >= 1"), (cfg.val_rows >= 0, "--val-rows must be >= 0"),
        (cfg.grad_clip >= 0, "--grad-clip must be >= 0"), (cfg.weight_decay >= 0, "--weight-decay must be >= 0"),
        (cfg.train_rows is None or cfg.train_rows >= 1, "--train-rows must be >= 1"),
        (cfg.full or (cfg.lora_r >= 1 and cfg.lora_alpha > 0), "--lora-r must be >= 1 and --lora-alpha > 0"),
        (cfg.full or 0 <= cfg.lora_dropout < 1, "--lora-dropout must be in [0, 1)"),
        (cfg.full or bool(_targets(cfg.target)), "--target names no module"),
        (cfg.val_max_new_tokens >= 1, "val_max_new_tokens must be >= 1"),
        (cfg.text_budget_chars is None or cfg.text_budget_chars >= 1, "--text-budget-chars must be >= 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise UserError(message)
    if cfg.out is None:
        slug = cfg.model.removeprefix("local/").strip("/").replace("/", "_").replace(":", "_")
        cfg.out = str(Path("models") / f"sft-{slug}-{cfg.format}-{cfg.regime}")
    return cfg


def _targets(target: str) -> list[str]:
    return [t.strip() for t in str(target).split(",") if t.strip()]


def _prepare_out(cfg: SFTConfig) -> Path:
    out = Path(cfg.out)
    if out.exists() and any(out.iterdir()):
        if not cfg.overwrite:
            raise UserError(f"{out} already holds files; use another --out, or --overwrite to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


# -- the model ------------------------------------------------------------------------------------

@dataclass
class Policy:
    chat: Any  # LocalHFModel: generation for validation, exactly as tsbench eval runs it
    trainable: Any  # the module the optimizer trains: a PeftModel (LoRA) or chat.model (full)
    lora: bool
    base_ref: str | None  # adapter_config base_model_name_or_path: "smollm2-135m" or an absolute dir
    info: dict


def _resolve_spec(spec: str) -> tuple[str, Path | None]:
    """(name_or_path for LocalHFModel, adapter dir when the spec is a PEFT adapter). Hub ids are downloaded."""
    from tsbench.models.local_hf import SMOLLM2_NAME

    local = spec.startswith("local/")
    name = spec.removeprefix("local/")
    path = Path(name).expanduser()
    if name == SMOLLM2_NAME:
        return name, None
    if path.is_dir():
        return str(path), path if (path / "adapter_config.json").is_file() else None
    if local or name.startswith((".", "/", "~")):
        raise UserError(f"local model not found: {name!r} (give {SMOLLM2_NAME!r} or a directory holding a "
                        "Hugging Face model or a PEFT adapter)")
    try:  # a Hugging Face id: a local snapshot, so the saved adapter's base is a directory LocalHFModel loads
        from huggingface_hub import snapshot_download

        return snapshot_download(name), None
    except Exception as exc:  # offline, unknown repo, gated: all one line for the user
        raise UserError(f"cannot fetch Hugging Face model {name!r}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


def _base_ref(weights: str) -> str:
    from tsbench.models.local_hf import SMOLLM2_NAME

    return weights if weights == SMOLLM2_NAME else str(Path(weights).expanduser().resolve())


def load_policy(cfg: SFTConfig) -> Policy:
    """The model to train, wrapped for LoRA unless cfg.full; an adapter given as the model keeps training."""
    import torch

    from tsbench.models.local_hf import LocalHFModel

    name, adapter = _resolve_spec(cfg.model)
    continue_adapter = adapter is not None and not cfg.full  # with --full an adapter is merged into its base
    load_name = name
    if continue_adapter:
        load_name = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    dtype = cfg.dtype or ("float32" if cfg.full else None)
    try:
        chat = LocalHFModel(load_name, device=cfg.device, dtype=dtype, max_new_tokens=cfg.val_max_new_tokens,
                            seed=cfg.seed, name=f"local/{name}")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not getattr(chat.tokenizer, "chat_template", None):
        raise UserError(f"{cfg.model} has no chat template; SFT formats conversations with it")
    torch.manual_seed(cfg.seed)  # LoRA's A matrices are initialised randomly
    if cfg.full:
        trainable, base_ref = chat.model, None
        for p in trainable.parameters():
            p.requires_grad_(True)
    elif continue_adapter:
        from peft import PeftModel

        trainable = PeftModel.from_pretrained(chat.model, str(adapter), is_trainable=True)
        base_ref = _base_ref(load_name)
    else:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=_targets(cfg.target), bias="none", task_type="CAUSAL_LM")
        try:
            trainable = get_peft_model(chat.model, lora)
        except ValueError as exc:
            raise UserError(f"LoRA --target {cfg.target}: {str(exc).splitlines()[0]}") from None
        base_ref = _base_ref(name)
    if cfg.gradient_checkpointing:
        chat.model.config.use_cache = False
        chat.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if not cfg.full:
            chat.model.enable_input_require_grads()
    n_train = sum(p.numel() for p in trainable.parameters() if p.requires_grad)
    n_all = sum(p.numel() for p in trainable.parameters())
    info = {
        "spec": cfg.model, "weights_dir": str(chat.weights_dir), "adapter_in": str(adapter) if adapter else None,
        "continued_adapter": continue_adapter, "base_model_name_or_path": base_ref, "device": chat.device,
        "dtype": str(next(chat.model.parameters()).dtype).removeprefix("torch."),
        "trainable_params": n_train, "total_params": n_all,
        "context": getattr(chat.model.config, "max_position_embeddings", None),
    }
    return Policy(chat, trainable, not cfg.full, base_ref, info)


def eos_ids(chat) -> set[int]:
    """Tokens that end a reply: the tokenizer's EOS and the generation config's."""
    found = set()
    for eos in (chat.tokenizer.eos_token_id, chat.model.generation_config.eos_token_id):
        if isinstance(eos, int):
            found.add(eos)
        elif eos:
            found.update(eos)
    return found


# -- data -----------------------------------------------------------------------------------------

@dataclass
class Data:
    train: list[sd.Example]
    val: list[sd.Example]
    info: dict


def _single_pass_data(cfg: SFTConfig, policy: Policy, max_seq_len: int, emit) -> Data:
    files = sd.split_files(cfg.data[0] if cfg.data else DEFAULT_DATA, cfg.regime)
    tok, eos = policy.chat.tokenizer, eos_ids(policy.chat)
    budget = cfg.text_budget_chars
    if budget is None:
        probe_ids = set(sd.balanced_ids(files["train"], read_index(files["train"])["category"].nunique()))
        probe = list(iter_rows(files["train"], ids=probe_ids))
        answer = max(len(tok(r.gold_text())["input_ids"]) for r in probe) + 8
        budget = sd.fit_text_budget(tok, probe, max_seq_len, max(answer, cfg.val_max_new_tokens))
    built = {}
    for split, limit in (("train", cfg.train_rows), ("val", cfg.val_rows)):
        if split == "val" and limit == 0:
            built[split] = ([], sd.DataStats())
            continue
        total = len(sd.balanced_ids(files[split], limit))
        emit("data_start", split=split, total=total)
        built[split] = sd.single_pass_examples(
            tok, files[split], text_budget_chars=budget, max_seq_len=max_seq_len, eos_ids=eos, limit=limit,
            keep_prompt=split == "val", on_row=lambda: emit("data_row", split=split))
    info = {
        "format": SINGLE_PASS, "regime": cfg.regime, "text_budget_chars": budget, "max_seq_len": max_seq_len,
        "files": {split: {"path": str(path), "sha256": sd.file_fingerprint(path)} for split, path in files.items()},
        "train": built["train"][1].to_dict(), "val": built["val"][1].to_dict(),
    }
    return Data(built["train"][0], built["val"][0], info)


def _select_trajectories(cfg: SFTConfig) -> tuple[list[sd.Trajectory], list[sd.Trajectory], dict]:
    """(train, val) episodes and the selection counts; no model needed, so bad data fails fast."""
    regimes = ("precise", "coarse") if cfg.regime == "both" else (cfg.regime,)
    trajectories, selection = sd.load_trajectories(cfg.data, min_score=cfg.min_score, regimes=regimes,
                                                   include_test_split=cfg.include_test_split)
    if not trajectories:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(selection["skipped"].items())) or "no rows"
        hint = (" (SFT on test rows contaminates the benchmark: run tsbench eval with --split train)"
                if selection["skipped"].get("test_split") else "")
        raise UserError(f"no usable RLM transcripts in {', '.join(cfg.data)} ({skipped}){hint}")
    train, val = sd.split_trajectories(trajectories, val_rows=cfg.val_rows, seed=cfg.seed)
    if cfg.train_rows is not None:
        train = train[: cfg.train_rows]
    return train, val, selection


def _trajectory_data(cfg: SFTConfig, policy: Policy, max_seq_len: int, emit, selected) -> Data:
    train_t, val_t, selection = selected
    tok, eos = policy.chat.tokenizer, eos_ids(policy.chat)
    emit("data_start", split="train", total=len(train_t))
    train, train_stats = sd.trajectory_examples(tok, train_t, max_seq_len=max_seq_len, eos_ids=eos)
    val, val_stats = sd.trajectory_examples(tok, val_t, max_seq_len=max_seq_len, eos_ids=eos, keep_prompt=True)
    info = {
        "format": RLM_TRAJECTORIES, "regime": cfg.regime, "min_score": cfg.min_score, "max_seq_len": max_seq_len,
        "results": [sd.results_fingerprint(Path(d)) for d in cfg.data], "selection": selection,
        "train": train_stats.to_dict(), "val": val_stats.to_dict(),
        "train_rows": sorted({e.row_id for e in train}), "val_rows": sorted({e.row_id for e in val}),
    }
    return Data(train, val, info)


# -- training -------------------------------------------------------------------------------------

class EarlyStopping:
    """Stop once the monitored value has not improved for `patience` consecutive updates."""

    def __init__(self, patience: int, min_delta: float = 0.0):
        self.patience = patience
        self.min_delta = min_delta
        self.best = math.inf
        self.bad = 0

    def update(self, value: float) -> bool:
        if value != value:  # NaN: nothing to monitor (no validation data)
            return False
        if value < self.best - self.min_delta:
            self.best, self.bad = value, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


def _batch(examples: list[sd.Example], pad_id: int, device: str) -> dict:
    import torch

    width = max(e.n_tokens for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), sd.IGNORE, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, : e.n_tokens] = torch.from_numpy(e.input_ids)
        labels[i, : e.n_tokens] = torch.from_numpy(e.labels)
        mask[i, : e.n_tokens] = 1
    return {"input_ids": ids.to(device), "labels": labels.to(device), "attention_mask": mask.to(device)}


def causal_lm_loss(model, batch: dict):
    """Token-mean cross-entropy over the trained tokens, projecting onto the vocabulary only where needed.

    The logits at position t predict token t + 1, so only positions whose next token is trained are
    kept (`logits_to_keep` as a 1-D index tensor). A single-pass example trains a few dozen answer
    tokens after thousands of prompt tokens; this skips the (sequence x vocabulary) logits tensor.
    """
    import torch.nn.functional as F

    targets = batch["labels"][:, 1:]
    keep = (targets != sd.IGNORE).any(dim=0).nonzero().squeeze(1)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep,
                   use_cache=False).logits
    picked = targets[:, keep]
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), picked.reshape(-1), ignore_index=sd.IGNORE)


def _optimizer(cfg: SFTConfig, trainable, total_steps: int):
    import torch
    from transformers import get_linear_schedule_with_warmup

    decay, no_decay = [], []
    for p in trainable.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr)
    warmup_steps = math.ceil(cfg.warmup * total_steps)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps), warmup_steps


def validate(policy: Policy, examples: list[sd.Example], cfg: SFTConfig, emit) -> dict:
    """Teacher-forced loss and the primary metric from greedy generations scored by the real scorers."""
    import torch

    from tsbench.tasks.anomalyxl.scoring import metrics as score_metrics

    if not examples:
        return {"val_loss": float("nan"), "val_primary": float("nan"), "val_valid": float("nan"),
                "val_by_category": "{}", "val_rows": 0}
    pad = policy.chat.tokenizer.pad_token_id
    pad = policy.chat.tokenizer.eos_token_id if pad is None else pad
    policy.trainable.eval()
    losses, scores, valid, by_category = [], [], [], {}
    try:
        with torch.no_grad():
            for e in examples:
                losses.append(float(causal_lm_loss(policy.trainable, _batch([e], pad, policy.chat.device))))
        emit("val_start", total=len(examples))
        for e in examples:
            text = policy.chat.generate(e.prompt, max_tokens=cfg.val_max_new_tokens).text
            scored = score_metrics(e.category, e.gold, text)
            scores.append(float(scored["score"]))
            valid.append(bool(scored["valid"]))
            by_category.setdefault(e.category, []).append(float(scored["score"]))
            emit("val_row", score=scores[-1])
    finally:
        policy.trainable.train()
    return {
        "val_loss": float(np.mean(losses)), "val_primary": float(np.mean(scores)), "val_valid": float(np.mean(valid)),
        "val_by_category": json.dumps({c: float(np.mean(v)) for c, v in by_category.items()}, sort_keys=True),
        "val_rows": len(examples),
    }


def save_checkpoint(policy: Policy, out: Path) -> None:
    """Write the model (adapter or full) and tokenizer into `out`, file by file from a staging dir."""
    staging = out / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    if policy.lora:
        config = policy.trainable.peft_config["default"]
        config.base_model_name_or_path = policy.base_ref
        policy.trainable.save_pretrained(str(staging), save_embedding_layers=False)
    else:
        policy.trainable.save_pretrained(str(staging), safe_serialization=True)
    policy.chat.tokenizer.save_pretrained(str(staging))
    for item in staging.iterdir():
        os.replace(item, out / item.name)
    staging.rmdir()


def _write_parquet(records: list[dict], path: Path) -> None:
    import pandas as pd

    tmp = path.with_suffix(".parquet.tmp")
    pd.DataFrame.from_records(records).to_parquet(tmp, index=False)
    tmp.replace(path)


def run_sft(cfg: SFTConfig, progress: ProgressFn | None = None) -> Path:
    """Fine-tune, validate every epoch, keep the best epoch in cfg.out; returns the output dir."""
    import torch

    def emit(event: str, **values: Any) -> None:
        if progress is not None:
            progress(event, values)

    cfg = _checked(cfg)
    selected = None  # bad data fails before a model loads
    if cfg.format == SINGLE_PASS:
        sd.split_files(cfg.data[0] if cfg.data else DEFAULT_DATA, cfg.regime)
    else:
        selected = _select_trajectories(cfg)
    out = _prepare_out(cfg)
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    emit("load_start", model=cfg.model)
    policy = load_policy(cfg)
    context = policy.info["context"]
    max_seq_len = cfg.max_seq_len or context or 4096
    if context is not None and max_seq_len > context:
        raise UserError(f"--max-seq-len {max_seq_len} exceeds the {context}-token context of {cfg.model}")
    if cfg.format == SINGLE_PASS:
        data = _single_pass_data(cfg, policy, max_seq_len, emit)
    else:
        data = _trajectory_data(cfg, policy, max_seq_len, emit, selected)
    if not data.train:
        raise UserError(f"no training examples fit max_seq_len={max_seq_len} "
                        f"(skipped: {data.info['train']['skipped']}); raise --max-seq-len or lower the text budget")

    manifest = {
        "kind": "sft-baseline", "config": cfg.to_dict(), "model": policy.info, "data": data.info,
        "eval_hint": {"model": f"local/{out}",
                      "harness": SINGLE_PASS if cfg.format == SINGLE_PASS else "rlm",
                      **({"text_budget_chars": data.info["text_budget_chars"], "regime": cfg.regime}
                         if cfg.format == SINGLE_PASS else {})},
        "versions": versions((*TRACKED_PACKAGES, "peft")), "git_commit": git_commit(),
        "created_at": _now(), "updated_at": _now(), "complete": False,
        "epochs_run": 0, "best_epoch": None, "best_val_primary": None, "stopped_early": False,
    }
    write_json(out / RUN_JSON, manifest)

    steps_per_epoch = math.ceil(len(data.train) / cfg.batch_size)
    optimizer, scheduler, warmup_steps = _optimizer(cfg, policy.trainable, steps_per_epoch * cfg.epochs)
    manifest["optimizer"] = {"steps_per_epoch": steps_per_epoch, "total_steps": steps_per_epoch * cfg.epochs,
                             "warmup_steps": warmup_steps, "schedule": "linear warmup, linear decay"}
    params = [p for p in policy.trainable.parameters() if p.requires_grad]
    pad = policy.chat.tokenizer.pad_token_id
    pad = policy.chat.tokenizer.eos_token_id if pad is None else pad
    rng = np.random.default_rng(cfg.seed)
    stopper = EarlyStopping(cfg.patience)
    epoch_records: list[dict] = []
    step_records: list[dict] = []
    best: tuple[float, float] | None = None  # (primary, -loss) of the saved epoch
    step = 0
    policy.trainable.train()
    for epoch in range(1, cfg.epochs + 1):
        epoch_started = time.perf_counter()
        order = rng.permutation(len(data.train))
        emit("epoch_start", epoch=epoch, epochs=cfg.epochs, steps=steps_per_epoch)
        losses = []
        for start in range(0, len(order), cfg.batch_size):
            batch = [data.train[i] for i in order[start: start + cfg.batch_size]]
            loss = causal_lm_loss(policy.trainable, _batch(batch, pad, policy.chat.device))
            if not torch.isfinite(loss):
                raise RuntimeError(f"non-finite training loss at step {step + 1} (epoch {epoch})")
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip > 0 else math.inf)
            lr = scheduler.get_last_lr()[0]  # the rate this step uses
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            losses.append(float(loss.detach()))
            step_records.append({"step": step, "epoch": epoch, "loss": losses[-1], "grad_norm": float(norm),
                                 "lr": lr, "tokens": sum(e.n_tokens for e in batch),
                                 "trained_tokens": sum(e.n_trained for e in batch)})
            emit("step", epoch=epoch, step=len(losses), steps=steps_per_epoch, loss=losses[-1])
        val = validate(policy, data.val, cfg, emit)
        key = (val["val_primary"], -val["val_loss"])
        improved = not data.val or best is None or key > best
        if improved:
            best = key
            save_checkpoint(policy, out)
            manifest.update(best_epoch=epoch, best_val_primary=None if not data.val else val["val_primary"])
        stop = stopper.update(val["val_loss"])
        epoch_records.append({"epoch": epoch, "train_loss": float(np.mean(losses)), **val, "saved": improved,
                              "steps": len(losses), "lr_end": scheduler.get_last_lr()[0],
                              "seconds": time.perf_counter() - epoch_started})
        _write_parquet(epoch_records, out / METRICS)
        _write_parquet(step_records, out / STEPS)
        manifest.update(epochs_run=epoch, updated_at=_now(), stopped_early=stop and epoch < cfg.epochs)
        write_json(out / RUN_JSON, manifest)
        emit("epoch_end", **epoch_records[-1], stop=stop)
        if stop:
            break
    manifest.update(complete=True, updated_at=_now(), seconds=time.perf_counter() - started)
    write_json(out / RUN_JSON, manifest)
    emit("done", out=str(out), best_epoch=manifest["best_epoch"])
    policy.chat.close()
    return out


# -- progress -------------------------------------------------------------------------------------

class RichSFTProgress:
    """Rich bars for run_sft: `with RichSFTProgress() as p: run_sft(cfg, p)`.

    Events: load_start, data_start, data_row, epoch_start, step, val_start, val_row, epoch_end, done.
    """

    def __init__(self, console=None):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                             TextColumn("{task.fields[note]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                             console=console)
        self.task = None

    def __enter__(self) -> "RichSFTProgress":
        self.bars.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bars.stop()

    def _bar(self, description: str, total: int | None) -> None:
        if self.task is not None:
            self.bars.remove_task(self.task)
        self.task = self.bars.add_task(description, total=total, note="")

    def __call__(self, event: str, values: dict) -> None:
        if event == "load_start":
            self.bars.console.print(f"loading {values['model']}")
        elif event == "data_start":
            self._bar(f"tokenising {values['split']}", values["total"])
        elif event in ("data_row", "val_row"):
            note = f"score {values['score']:.2f}" if "score" in values else ""
            self.bars.update(self.task, advance=1, note=note)
        elif event == "epoch_start":
            self._bar(f"epoch {values['epoch']}/{values['epochs']}", values["steps"])
        elif event == "step":
            self.bars.update(self.task, advance=1, note=f"loss {values['loss']:.4f}")
        elif event == "val_start":
            self._bar("validating", values["total"])
        elif event == "epoch_end":
            self.bars.console.print(
                f"epoch {values['epoch']}: train loss {values['train_loss']:.4f}  val loss {values['val_loss']:.4f}  "
                f"val primary {values['val_primary']:.3f}" + ("  (saved)" if values["saved"] else "")
                + ("  early stop" if values["stop"] else ""))
        elif event == "done":
            self.bars.console.print(f"best epoch {values['best_epoch']}; model in {values['out']}")
