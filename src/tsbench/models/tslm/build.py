"""Building a TSLM from its settings, and saving / loading one as a run dir.

A run dir holds `tslm.json` (architecture, settings, LoRA, where the encoder and backbone came
from) and `trainable.safetensors` (the LoRA and fusion weights; the frozen parts are rebuilt from
their sources). A tiny random encoder is saved in the run dir (`encoder/`), so the run does not
depend on a seed. Weights come from a local path or the user's hub cache: nothing is downloaded.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.encoder import SeriesEncoder, load_encoder
from tsbench.models.tslm.model import TSLM
from tsbench.models.tslm.settings import ARCHITECTURES, TINY_ENCODER, TSLMSettings

RUN_FILE = "tslm.json"
WEIGHTS_FILE = "trainable.safetensors"
ENCODER_DIR = "encoder"


@dataclass
class LoraSpec:
    """The paper's (Appendix C): rank 16, alpha 32, dropout 0.05, no bias, q_proj and v_proj."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    targets: tuple[str, ...] = ("q_proj", "v_proj")


def pick_device(requested: str | None) -> str:
    return requested or ("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(requested: str | None, device: str) -> torch.dtype:
    if requested:
        return getattr(torch, requested)
    return torch.bfloat16 if device.startswith("cuda") else torch.float32


def load_backbone(spec: str, dtype: torch.dtype):
    """(model, tokenizer) from local/smollm2-135m, a directory, or a hub id in the local cache."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tsbench.models.resolve import resolve_model

    try:
        source = resolve_model(spec if spec.startswith("local/") else spec)
    except ValueError as exc:
        raise ModelUnavailableError(str(exc)) from None
    if source.adapter:
        raise ModelUnavailableError(
            f"backbone {spec!r} is an adapter: give the base model (the TSLM adds its own LoRA)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.weights, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(source.weights, local_files_only=True, dtype=dtype)
    except OSError:
        raise ModelUnavailableError(
            f"no backbone weights for {spec!r} on this machine (give a directory, or a hub id already in the hub cache)"
        ) from None
    return model, tokenizer


def build_tslm(arch: str, settings: TSLMSettings, lora: LoraSpec | None = None, seed: int = 0) -> TSLM:
    """A fresh TSLM: frozen encoder, LoRA on the backbone's q/v projections, a new fusion module."""
    if arch not in ARCHITECTURES:
        raise ModelUnavailableError(f"unknown TSLM architecture {arch!r}; use one of {', '.join(ARCHITECTURES)}")
    from peft import LoraConfig, get_peft_model

    lora = lora or LoraSpec()
    device = pick_device(settings.device)
    dtype = pick_dtype(settings.compute_dtype, device)
    backbone, tokenizer = load_backbone(settings.backbone, dtype)
    backbone.config.use_cache = True
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        bias="none",
        target_modules=list(lora.targets),
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(seed)
    backbone = get_peft_model(backbone, config)
    encoder = SeriesEncoder(load_encoder(settings.encoder, seed))
    model = TSLM(arch, encoder, backbone, tokenizer, settings)
    model.fusion.to(dtype)
    return model.to(device)


def save_run(model: TSLM, out: Path, lora: LoraSpec, extra: dict | None = None) -> Path:
    """Write tslm.json and the trainable weights (and a tiny encoder's weights) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    settings = asdict(model.settings)
    if settings["encoder"] == TINY_ENCODER:
        model.encoder.chronos.save_pretrained(out / ENCODER_DIR)
        settings["encoder"] = ENCODER_DIR
    model.save_trainable(out / WEIGHTS_FILE)
    record = {"arch": model.arch, "settings": settings, "lora": asdict(lora), **(extra or {})}
    (out / RUN_FILE).write_text(json.dumps(record, indent=2, default=list), encoding="utf-8")
    return out


def is_run_dir(path: str | Path) -> bool:
    return (Path(path).expanduser() / RUN_FILE).is_file()


def load_run(run_dir: str | Path, device: str | None = None) -> TSLM:
    """The TSLM a run dir holds, its trainable weights restored (every one of them, or an error)."""
    run_dir = Path(run_dir).expanduser()
    if not is_run_dir(run_dir):
        raise ModelUnavailableError(f"no TSLM run at {run_dir} ({RUN_FILE} missing); train one with sft-baseline")
    record = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    settings = TSLMSettings(**record["settings"])
    if settings.encoder == ENCODER_DIR:
        settings.encoder = str(run_dir / ENCODER_DIR)
    if device:
        settings.device = device
    lora = record["lora"]
    model = build_tslm(
        record["arch"], settings, LoraSpec(lora["r"], lora["alpha"], lora["dropout"], tuple(lora["targets"]))
    )
    model.load_trainable(run_dir / WEIGHTS_FILE)
    model.eval()
    return model
