"""`tsbench sft-baseline --model tslm/<arch>` (or toto/<checkpoint>): the series format, a data builder
for transformers' Trainer (train/sft.py) in front of a TSLM baseline (Appendix C).

Rows come from the family's train split through the TaskFamily hooks (any family with one; for
AnomalyXL one regime per run, as the paper's per-regime variants): the `series` harness's own
prompt plus the series itself, answered with the family's `sft_target`. Only the answer tokens are
trained; the LoRA (the paper's: rank 16, alpha 32, dropout 0.05, q_proj and v_proj, from
`policy`) and the fusion module train, the encoder is frozen. The model reads embeddings spliced
from text and series, so the Trainer gets `SeriesLM`, a module whose forward is the TSLM's own answer
loss, and `collate`, which hands it whole rows (batch size 1 is the paper's). The run dir loads as
`tslm/<dir>`. `--model toto/<checkpoint>` is the same format on Toto-1.0-QA
(models/tslm/toto_checkpoint.py): only its text decoder's LoRA trains, each row carries its plot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tsbench.core.errors import UserError
from tsbench.harness.series import series_messages
from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.build import LoraSpec, build_tslm, save_run
from tsbench.models.tslm.settings import ARCHITECTURES
from tsbench.tasks import get_taskset
from tsbench.train import sft_data as sd
from tsbench.train.sft_config import TOTO_PREFIX, TSLM_PREFIX, SFTConfig, checked, default_data
from tsbench.train.sft_format import Prepared


@dataclass
class SeriesExample:
    prompt: Any  # what the model reads: the rendered chat text, one marker per channel (toto: the messages)
    series: torch.Tensor  # (channels, L)
    answer_ids: list[int]
    row_id: str
    category: str
    gold: Any


def architecture(cfg: SFTConfig) -> str:
    if cfg.policy.model.startswith(TOTO_PREFIX):  # toto/<checkpoint>: a LoRA on Toto-1.0-QA's text decoder
        return "toto"
    arch = cfg.policy.model.removeprefix(TSLM_PREFIX).strip("/")
    if arch not in ARCHITECTURES:
        raise UserError(f"--model tslm/<arch> takes one of {', '.join(ARCHITECTURES)} (got {cfg.policy.model})")
    return arch


def tslm_checked(cfg: SFTConfig) -> SFTConfig:
    given_out = cfg.out
    cfg = checked(cfg)
    if given_out is None:
        cfg.out = str(Path("models") / f"tslm-{architecture(cfg)}-{cfg.regime or get_taskset(cfg.family).name}")
    architecture(cfg)
    problems = cfg.tslm.problems()
    if cfg.format != "single-pass-text":
        problems.append("a TSLM trains on rows (the default format), not on rlm-trajectories")
    if not cfg.policy.lora:
        problems.append("a TSLM trains a LoRA on its backbone (--lora >= 1; the paper: 16)")
    if cfg.gradient_checkpointing:
        problems.append("a TSLM trains without gradient checkpointing (its forward splices series embeddings)")
    if problems:
        raise UserError("; ".join(problems))
    return cfg


def lora_of(cfg: SFTConfig) -> LoraSpec:
    policy = cfg.policy
    targets = policy.targets()
    return LoraSpec(
        policy.lora,
        policy.lora_alpha or 2 * policy.lora,
        policy.lora_dropout,
        ("all-linear",) if targets == "all-linear" else tuple(targets),
    )


def examples(model, family, refs) -> tuple[list[SeriesExample], dict[str, int]]:
    """Rows as (prompt, series, answer) examples; rows without a series or a scoring target are skipped."""
    tokenizer = model.tokenizer
    built, skipped = [], {}
    for ref in refs:
        sample = family.load(ref)
        problem = sd.target_problem(family, sample)
        if problem is not None:
            skipped[problem] = skipped.get(problem, 0) + 1
            continue
        task = sample.task
        target = family.sft_target(task.category, sample.gold)
        answer = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        prompt = model.render_prompt(series_messages(task, with_plot=bool(getattr(model, "wants_plot", False))))
        built.append(
            SeriesExample(
                prompt,
                torch.tensor(np.asarray(task.values, dtype=np.float32)),
                answer,
                task.row_id,
                task.category,
                sample.gold,
            )
        )
    return built, skipped


def save_trained(model, out: Path, lora: LoraSpec, extra: dict) -> None:
    if model.arch == "toto":
        from tsbench.models.tslm.toto_checkpoint import save_run as save_toto_run

        save_toto_run(model, out, lora, extra)
    else:
        save_run(model, out, lora, extra)


class SeriesLM(torch.nn.Module):
    """A TSLM (or TotoQA) as transformers' Trainer trains it: the mean of its rows' answer losses."""

    def __init__(self, tslm: torch.nn.Module):
        super().__init__()
        self.tslm = tslm

    def forward(self, prompts: list, series: list[torch.Tensor], answer_ids: list[torch.Tensor]) -> dict:
        losses = [self.tslm.loss(p, s, a.tolist()) for p, s, a in zip(prompts, series, answer_ids)]
        return {"loss": torch.stack(losses).mean()}


def collate(rows: list[SeriesExample]) -> dict[str, list]:
    """Whole rows for SeriesLM: a prompt (text or messages) and a series are not padded tensors."""
    return {
        "prompts": [r.prompt for r in rows],
        "series": [r.series for r in rows],
        "answer_ids": [torch.tensor(r.answer_ids) for r in rows],
    }


def greedy_reply(max_new_tokens: int) -> Callable[[SeriesLM, SeriesExample], str]:
    def reply(model: SeriesLM, e: SeriesExample) -> str:
        ids, _ = model.tslm.generate(e.prompt, e.series, max_new_tokens)
        return model.tslm.tokenizer.decode(ids, skip_special_tokens=True).strip()

    return reply


class SeriesFormat:
    """The rows of a family with a train split, for a TSLM or Toto-1.0-QA."""

    def __init__(self, cfg: SFTConfig):
        self.cfg = tslm_checked(cfg)
        self.arch = architecture(self.cfg)
        self.family = get_taskset(self.cfg.family)
        data = self.cfg.data[0] if self.cfg.data else default_data(self.cfg)
        self.train_refs, self.val_refs, self.val_from = sd.train_val_refs(
            self.family, data, self.cfg.train_rows, self.cfg.val_rows, self.cfg.regime, self.cfg.seed
        )

    def prepare(self, out: Path, emit: Callable[..., None]) -> Prepared:
        cfg, arch = self.cfg, self.arch
        emit("load_start", model=cfg.policy.model if arch == "toto" else f"{TSLM_PREFIX}{arch} on {cfg.tslm.backbone}")
        lora = lora_of(cfg)
        try:
            if arch == "toto":
                from tsbench.models.tslm.toto_checkpoint import build_for_sft

                model = build_for_sft(cfg.policy.model.removeprefix(TOTO_PREFIX), cfg.tslm, lora, seed=cfg.seed)
            else:
                model = build_tslm(arch, cfg.tslm, lora, seed=cfg.seed)
        except ModelUnavailableError as exc:
            raise UserError(str(exc)) from None
        emit("data_start")
        train, skipped = examples(model, self.family, self.train_refs)
        val, _ = examples(model, self.family, self.val_refs)
        if not train:
            raise UserError(f"no {self.family.name} train row can be a TSLM example ({skipped or 'none selected'})")

        def save(trainer: Any, target: Path) -> None:
            save_trained(model, target, lora, {"best_epoch": int(round(trainer.state.epoch or cfg.epochs))})

        kind = "toto" if arch == "toto" else "tslm"
        on_gpu = model.device.type == "cuda"
        return Prepared(
            model=SeriesLM(model),
            train=train,
            val=val or None,
            save=save,
            data={
                "format": "series",
                "family": self.family.name,
                "regime": cfg.regime,
                "val_from": self.val_from,
                "train": {"examples": len(train), "skipped": skipped},
                "val": {"examples": len(val)},
            },
            model_record={"spec": cfg.policy.model, "arch": arch, "lora": cfg.policy.lora},
            eval_hint={"model": f"{kind}/{out}", "harness": "series"},
            trl=False,
            # whole rows, not columns: nothing to drop, and the answer ids are the labels
            args={
                "remove_unused_columns": False,
                "label_names": ["answer_ids"],
                "prediction_loss_only": True,
                "bf16": False,
            },  # the TSLM picks its own dtype (models/tslm/build.pick_dtype)
            held_out=val,
            reply=greedy_reply(cfg.val_max_new_tokens),
            data_collator=collate,
            on_gpu=on_gpu,
            record={"arch": arch, "family": self.family.name, "regime": cfg.regime},
        )
