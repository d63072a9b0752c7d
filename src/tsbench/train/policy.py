"""The trainable policy's weights, in and out.

In: `--model` goes through `tsbench.models.resolve.resolve_model` (the one resolver). When it is
an SFT adapter (a warm start) the adapter is folded into its base ONCE and saved as
<run>/warm_start: that directory is the policy from then on, so
  * the KL reference is the warm-start policy (TimeMaster Alg. 1: pi_ref <- pi_theta after SFT):
    TRL's reference is the LoRA-disabled model (= warm_start) or, for full training, a fresh load
    of the directory the policy came from (= warm_start);
  * `--lora` settings are honoured: a NEW adapter of that rank trains on top of the warm start.
Out: checkpoints and the final model are Hugging Face directories that `local/<dir>` loads; an
adapter names a base `resolve_model` finds offline ("smollm2-135m", an absolute directory, or a
cached hub snapshot).
A vision-language model (any image-text-to-text model, e.g. Qwen2.5-VL) loads through
AutoModelForImageTextToText with its processor, which is then TRL's `processing_class`: the images of
an episode reach the loss forward as pixels (models/local_vlm.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError
from tsbench.models.resolve import ModelSource, resolve_model

WARM_START = "warm_start"
_DONE = "tsbench-warm-start.json"  # written last: a warm_start dir without it is redone


@dataclass
class Policy:
    model: Any  # a transformers PreTrainedModel (the LoRA, if any, is added by the trainer from peft_config)
    tokenizer: Any
    peft_config: Any  # peft.LoraConfig, or None for full-parameter training
    base_record: str  # what a saved adapter names as its base
    warm_start: str | None  # the adapter that was folded in, when --model was one
    processor: Any = None  # a vision-language model's processor (its tokenizer is `tokenizer`); None: text-only

    @property
    def processing_class(self) -> Any:
        """What TRL's trainer is given: the processor for a VLM (images in the loss), else the tokenizer."""
        return self.processor if self.processor is not None else self.tokenizer


def resolve(spec: str) -> ModelSource:
    try:
        return resolve_model(spec)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def torch_dtype(name: str | None, on_gpu: bool, *, full: bool = False) -> Any:
    """The dtype the weights load in. Full-parameter training keeps fp32 master weights whatever the
    device: AdamW's lr-1e-6 updates vanish in bf16's 8-bit mantissa (the issue measured 1.9 % of the
    weights moving in 10 steps vs 99.99 % in fp32); on a GPU the compute is still bf16, through the
    trainer's mixed precision (TRL `bf16=True` = accelerate autocast). A LoRA's frozen base may be bf16
    (peft keeps the adapter itself in fp32)."""
    import torch

    if name:
        return getattr(torch, name)
    return torch.bfloat16 if on_gpu and not full else torch.float32


def load_tokenizer(where: str, local: bool) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=local)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def model_class(weights: str, local: bool) -> Any:
    """AutoModelForImageTextToText for a vision-language model, else AutoModelForCausalLM."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    return AutoModelForImageTextToText if is_vl(weights, local) else AutoModelForCausalLM


def is_vl(weights: str, local: bool) -> bool:
    return bool(vision_language(weights, local))


def vision_language(weights: str, local: bool) -> bool | None:
    """Whether the weights are an image-text-to-text model; None when a hub model's config cannot be read."""
    from tsbench.models.local_vlm import is_vision_language

    if local:
        return is_vision_language(weights)
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    try:
        return AutoConfig.from_pretrained(weights).model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    except (OSError, ValueError):
        return None


def load_processor(where: str, local: bool) -> Any:
    """A VLM's processor, its tokenizer padding on the left (TRL pads prompts so; the per-token vision ids align)."""
    from tsbench.models.local_vlm import load_processor as load

    processor = load(where, local=local)
    processor.tokenizer.padding_side = "left"
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor


def source_is_vision_language(spec: str) -> bool | None:
    """Whether the policy `spec` names is a vision-language model; None when its config cannot be read here."""
    source = resolve(spec)
    return vision_language(source.weights, source.local)


def source_tokenizer(spec: str) -> Any:
    """The tokenizer `load_policy` will use, without loading any weights (an SFT adapter's own when it has one)."""
    source = resolve(spec)
    if is_vl(source.weights, source.local):
        return load_processor(source.weights, source.local).tokenizer
    if source.adapter and (Path(source.adapter) / "tokenizer_config.json").is_file():
        return load_tokenizer(source.adapter, source.local)
    return load_tokenizer(source.weights, source.local)


def load_policy(cfg: Any, run_dir: Path, *, on_gpu: bool) -> Policy:
    """`cfg` is a PolicyConfig. Safe to call on every process: the warm start is written by the main one."""
    from accelerate import PartialState

    source = resolve(cfg.model)
    dtype = torch_dtype(cfg.dtype, on_gpu, full=not cfg.lora)
    weights, base_record, local = source.weights, saved_base(source), source.local
    if source.adapter:
        target = run_dir / WARM_START
        with PartialState().main_process_first():
            if not (target / _DONE).is_file():
                fold_adapter(source, target, dtype)
        weights, base_record, local = str(target.resolve()), str(target.resolve()), True
    model = model_class(weights, local).from_pretrained(weights, local_files_only=local, dtype=dtype)
    processor = load_processor(weights, local) if is_vl(weights, local) else None
    tokenizer = processor.tokenizer if processor is not None else load_tokenizer(weights, local)
    peft_config = None
    if cfg.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=cfg.lora,
            lora_alpha=cfg.lora_alpha or 2 * cfg.lora,
            lora_dropout=cfg.lora_dropout,
            target_modules=cfg.targets(),
            bias="none",
            task_type="CAUSAL_LM",
        )
    return Policy(model, tokenizer, peft_config, base_record, source.adapter, processor)


def fold_adapter(source: ModelSource, target: Path, dtype: Any) -> None:
    """base + adapter -> one plain model directory (with the adapter's tokenizer when it has one)."""
    import shutil

    from peft import PeftModel

    base = model_class(source.weights, source.local).from_pretrained(
        source.weights, local_files_only=source.local, dtype=dtype
    )
    merged = PeftModel.from_pretrained(base, source.adapter).merge_and_unload()
    shutil.rmtree(target, ignore_errors=True)
    merged.save_pretrained(target, safe_serialization=True)
    has_tokenizer = (Path(source.adapter) / "tokenizer_config.json").is_file()
    if is_vl(source.weights, source.local):
        load_processor(source.weights, source.local).save_pretrained(target)
    load_tokenizer(source.adapter if has_tokenizer else source.weights, source.local).save_pretrained(target)
    (target / _DONE).write_text(json.dumps({"adapter": source.adapter, "base": source.base_record}))


def saved_base(source: ModelSource) -> str:
    """What a saved adapter should name as its base: a hub model by its local snapshot when cached."""
    if source.local:
        return source.base_record
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(source.weights, local_files_only=True)
    except Exception:  # not cached (yet), or not a valid repo id: keep the id itself
        return source.weights


def name_base(model_dir: Path, base_record: str) -> None:
    """Point a saved adapter at a base that `local/<dir>` can load offline (peft writes the path it loaded)."""
    config = model_dir / "adapter_config.json"
    if config.is_file():
        data = json.loads(config.read_text())
        data["base_model_name_or_path"] = base_record
        config.write_text(json.dumps(data, indent=2))
