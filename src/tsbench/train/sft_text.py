"""The language-model formats of `sft-baseline`, data builders for TRL's SFTTrainer (train/sft.py).

- `single-pass-text`: the single-pass-text harness's own prompt for a row of the task family
  (`--family`, AnomalyXL by default: one regime), answered with the family's `sft_target`; trained
  on the train split, validated on val (paper Appendix C), or on a seeded part of train held out
  when the family has no val split (TimerBed).
- `rlm-trajectories`: finished RLM episodes from eval results that scored at least `min_score`;
  the warm start before `train-grpo` (TimeMaster §3.4).

Examples reach TRL pre-tokenized, with an `assistant_masks` column: only the policy's own replies
(through their end-of-turn token) are trained; system, question and sandbox observations are
masked. That is TRL's assistant-only loss, with the mask built from the model's real chat template
turn by turn (sft_data.encode_conversation), so it works for templates TRL cannot patch. The
held-out rows are answered greedily (the family scores them after each epoch).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.train import sft_data as sd
from tsbench.train.sft_config import RLM_TRAJECTORIES, SINGLE_PASS, SFTConfig, checked, default_data
from tsbench.train.sft_format import Prepared


def as_dataset(examples: list[sd.Example]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "input_ids": [e.input_ids.tolist() for e in examples],
            "assistant_masks": [(e.labels != sd.IGNORE).astype(int).tolist() for e in examples],
        }
    )


def select_trajectories(cfg: SFTConfig) -> tuple[list, list, dict]:
    """(train, val) episodes and the selection counts; no model needed, so bad data fails fast."""
    regimes = None if cfg.regime is None else ("precise", "coarse") if cfg.regime == "both" else (cfg.regime,)
    trajectories, selection = sd.load_trajectories(
        cfg.data, min_score=cfg.min_score, regimes=regimes, include_test_split=cfg.include_test_split
    )
    if not trajectories:
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(selection["skipped"].items())) or "no rows"
        hint = (
            " (SFT on test rows contaminates the benchmark: run tsbench eval with --split train)"
            if selection["skipped"].get("test_split")
            else ""
        )
        raise UserError(f"no usable RLM transcripts in {', '.join(cfg.data)} ({skipped}){hint}")
    train, val = sd.split_trajectories(trajectories, val_rows=cfg.val_rows, seed=cfg.seed)
    return (train[: cfg.train_rows] if cfg.train_rows is not None else train), val, selection


def single_pass_data(cfg: SFTConfig, tokenizer: Any, eos: set[int], max_seq_len: int) -> tuple[list, list, dict]:
    family = get_taskset(cfg.family)
    data_dir = cfg.data[0] if cfg.data else default_data(cfg)
    train_refs, val_refs, val_from = sd.train_val_refs(
        family, data_dir, cfg.train_rows, cfg.val_rows, cfg.regime, cfg.seed
    )
    budget = cfg.text_budget_chars
    if budget is None:  # the longest prompt that leaves room for the longest answer
        train_files = sd.split_files(family, data_dir)["train"]
        n_categories = sd.rows_of(family, train_files, cfg.regime)["category"].nunique()
        probe = [family.load(r) for r in sd.balanced_refs(family, train_files, n_categories, cfg.regime)]
        probe = [p for p in probe if sd.target_problem(family, p) is None]
        if not probe:
            raise UserError(
                f"no {family.name} train row of {data_dir} can be an SFT example "
                "(no series, or its sft_target does not score 1)"
            )
        answer = max(len(tokenizer(family.sft_target(p.task.category, p.gold))["input_ids"]) for p in probe) + 8
        budget = sd.fit_text_budget(
            tokenizer, [p.task for p in probe], max_seq_len, max(answer, cfg.val_max_new_tokens)
        )
    common = {"text_budget_chars": budget, "max_seq_len": max_seq_len, "eos_ids": eos}
    train, train_stats = sd.single_pass_examples(tokenizer, family, train_refs, split="train", **common)
    val, val_stats = (
        ([], sd.DataStats())
        if cfg.val_rows == 0
        else sd.single_pass_examples(tokenizer, family, val_refs, keep_prompt=True, split=val_from, **common)
    )
    used = {split: sorted({r.path for r in refs}) for split, refs in (("train", train_refs), ("val", val_refs))}
    info = {
        "format": SINGLE_PASS,
        "family": family.name,
        "regime": cfg.regime,
        "text_budget_chars": budget,
        "max_seq_len": max_seq_len,
        "val_from": val_from,
        "files": {
            split: [{"path": p, "sha256": sd.file_fingerprint(Path(p))} for p in paths] for split, paths in used.items()
        },
        "train": train_stats.to_dict(),
        "val": val_stats.to_dict(),
    }
    return train, val, info


def trajectory_data(
    cfg: SFTConfig, selected: tuple, tokenizer: Any, eos: set[int], max_seq_len: int
) -> tuple[list, list, dict]:
    train_t, val_t, selection = selected
    train, train_stats = sd.trajectory_examples(tokenizer, train_t, max_seq_len=max_seq_len, eos_ids=eos)
    val, val_stats = sd.trajectory_examples(tokenizer, val_t, max_seq_len=max_seq_len, eos_ids=eos, keep_prompt=True)
    info = {
        "format": RLM_TRAJECTORIES,
        "regime": cfg.regime,
        "min_score": cfg.min_score,
        "max_seq_len": max_seq_len,
        "results": [sd.results_fingerprint(Path(d)) for d in cfg.data],
        "selection": selection,
        "train_rows": sorted({e.row_id for e in train}),
        "val_rows": sorted({e.row_id for e in val}),
        "train": train_stats.to_dict(),
        "val": val_stats.to_dict(),
    }
    return train, val, info


def greedy_reply(tokenizer: Any, max_new_tokens: int) -> Callable[[Any, sd.Example], str]:
    from tsbench.train.backends import HFBackend, Request
    from tsbench.train.chat_tokens import ChatTokens

    chat = ChatTokens(tokenizer)

    def reply(model: Any, example: sd.Example) -> str:
        ids = chat.first_prompt(example.prompt)
        return chat.decode(HFBackend(model, tokenizer).generate([Request(ids, max_new_tokens, 0.0, 0)])[0].ids)

    return reply


class TextFormat:
    """single-pass-text or rlm-trajectories for a language model (LoRA or full)."""

    def __init__(self, cfg: SFTConfig):
        self.cfg = cfg = checked(cfg)
        self.selected = None  # bad data fails before a model loads
        if cfg.format == SINGLE_PASS:
            sd.split_files(get_taskset(cfg.family), cfg.data[0] if cfg.data else default_data(cfg))
        else:
            self.selected = select_trajectories(cfg)

    def prepare(self, out: Path, emit: Callable[..., None]) -> Prepared:
        import torch

        from tsbench.train.chat_tokens import eos_token_ids
        from tsbench.train.policy import load_policy, name_base

        cfg = self.cfg
        on_gpu = torch.cuda.is_available()
        emit("load_start", model=cfg.policy.model)
        policy = load_policy(cfg.policy, out, on_gpu=on_gpu)
        if not getattr(policy.tokenizer, "chat_template", None):
            raise UserError(f"{cfg.policy.model} has no chat template; SFT formats conversations with it")
        context = getattr(policy.model.config, "max_position_embeddings", None)
        max_seq_len = cfg.max_seq_len or context or 4096
        if context is not None and max_seq_len > context:
            raise UserError(f"--max-seq-len {max_seq_len} exceeds the {context}-token context of {cfg.policy.model}")
        eos = eos_token_ids(policy.tokenizer, policy.model)
        emit("data_start")
        if cfg.format == SINGLE_PASS:
            train, val, info = single_pass_data(cfg, policy.tokenizer, eos, max_seq_len)
        else:
            train, val, info = trajectory_data(cfg, self.selected, policy.tokenizer, eos, max_seq_len)
        if not train:
            raise UserError(
                f"no training examples fit max_seq_len={max_seq_len} "
                f"(skipped: {info['train']['skipped']}); raise --max-seq-len or lower the text budget"
            )

        def save(trainer: Any, target: Path) -> None:
            trainer.save_model(str(target))
            name_base(target, policy.base_record)

        hint = {"model": f"local/{out}", "harness": SINGLE_PASS if cfg.format == SINGLE_PASS else "rlm"}
        if cfg.format == SINGLE_PASS:
            hint.update(text_budget_chars=info["text_budget_chars"], regime=cfg.regime)
        return Prepared(
            model=policy.model,
            train=as_dataset(train),
            val=as_dataset(val) if val else None,
            save=save,
            data=info,
            model_record={
                "spec": cfg.policy.model,
                "base_model_name_or_path": policy.base_record,
                "warm_start": policy.warm_start,
                "lora": cfg.policy.lora,
                "context": context,
            },
            eval_hint=hint,
            # pre-tokenized rows whose assistant_masks are the loss mask: TRL neither truncates nor packs them
            args={"max_length": None, "packing": False, "completion_only_loss": False, "dataset_num_proc": None},
            held_out=val,
            reply=greedy_reply(policy.tokenizer, cfg.val_max_new_tokens),
            processing_class=policy.tokenizer,
            peft_config=policy.peft_config,
            on_gpu=on_gpu,
        )
