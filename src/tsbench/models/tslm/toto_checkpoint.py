"""Loading Toto-1.0-QA checkpoints (ARFBench's published layout) and tsbench's SFT runs on top of them.

A checkpoint directory, as ARFBench's `TotoAnomalyQAModel.save_pretrained` writes it (and as the hub
repo Datadog/Toto-1.0-QA-Experimental holds it):

    config.json      {"model_type": "vlm_with_timeseries", "toto_model_name": ..., "variate_mlp_hidden_dim",
                      "projector_hidden_dim", "variate_dropout"}
    vlm/             the VLM (Qwen3-VL-32B-Instruct, its ARFBench LoRA merged) as a transformers directory
    ts_modules.pt    {"variate_embedding": state dict, "ts_projector": state dict}
    processor files  (preprocessor_config.json, tokenizer ...) at the root, else in vlm/
    toto/            tsbench's addition, optional: the Toto weights (config.json + model.safetensors);
                     without it `toto_model_name` is read from a local directory or the hub cache

Nothing is downloaded: `toto/<dir>` or `toto/<hub id in the hub cache>`. ARFBench's older layout
(adapter/ + ts_modules.pt over a base model) is refused with a line saying how to merge it.

An SFT run (`sft-baseline --model toto/<checkpoint>`) is a directory with `toto.json` (the base
checkpoint, the LoRA, the settings) and `trainable.safetensors` (the LoRA weights only: everything
else is frozen and comes from the base checkpoint).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.settings import TSLMSettings

MODEL_TYPE = "vlm_with_timeseries"
RUN_FILE = "toto.json"
WEIGHTS_FILE = "trainable.safetensors"
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


def resolve_checkpoint(name: str) -> Path:
    """A local directory, or a hub id already in the hub cache; else one line."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if name.count("/") == 1 and not path.exists():
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(name, local_files_only=True))
        except Exception:  # noqa: BLE001 - not in the cache (or no hub client): the line below says it
            pass
    raise ModelUnavailableError(
        f"no Toto checkpoint at {path} (a local directory in Toto-1.0-QA's layout, or a hub id such as "
        "Datadog/Toto-1.0-QA-Experimental already in the hub cache; see docs/tslm.md)"
    )


def read_config(root: Path) -> dict:
    config_file = root / "config.json"
    if (root / "adapter").is_dir() and not config_file.is_file():
        raise ModelUnavailableError(
            f"{root} is ARFBench's older layout (adapter/ + ts_modules.pt); merge the adapter into the VLM and "
            "save it as vlm/ with a config.json (docs/tslm.md, 'Toto checkpoints')"
        )
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelUnavailableError(f"{root} has no readable config.json (a Toto-1.0-QA checkpoint has one)") from None
    if config.get("model_type") != MODEL_TYPE or not (root / "vlm").is_dir() or not (root / "ts_modules.pt").is_file():
        raise ModelUnavailableError(
            f"{root} is not a Toto-1.0-QA checkpoint (config.json with model_type {MODEL_TYPE!r}, vlm/, ts_modules.pt)"
        )
    return config


def load_checkpoint(name: str, settings: TSLMSettings):
    """The TotoQA a checkpoint holds, every part frozen (the VLM too: the SFT adds its LoRA)."""
    from tsbench.models.local_hf import dtype_option, offline_transformers
    from tsbench.models.local_vlm import load_processor
    from tsbench.models.tslm.build import pick_device, pick_dtype
    from tsbench.models.tslm.toto_encoder import TotoSeriesEncoder, load_toto
    from tsbench.models.tslm.toto_qa import SeriesProjector, TotoQA, VariateEmbedding

    root = resolve_checkpoint(name)
    config = read_config(root)
    device = pick_device(settings.device)
    dtype = pick_dtype(settings.compute_dtype, device)
    toto = load_toto(
        root / "toto" if (root / "toto").is_dir() else config.get("toto_model_name", "Datadog/Toto-Open-Base-1.0")
    )
    encoder = TotoSeriesEncoder(toto, settings.toto_max_length, settings.toto_max_channels)
    transformers = offline_transformers()
    try:
        vlm = transformers.AutoModelForImageTextToText.from_pretrained(
            str(root / "vlm"), local_files_only=True, **dtype_option(dtype)
        )
        has_processor = any((root / "vlm" / f).is_file() for f in PROCESSOR_FILES)
        processor = load_processor(root / "vlm" if has_processor else root)  # ARFBench saves it at the root
    except (OSError, ValueError) as exc:
        raise ModelUnavailableError(
            f"{root / 'vlm'}: cannot load the VLM or its processor ({str(exc)[:160]})"
        ) from None
    vlm.requires_grad_(False)
    d_model = int(vlm.get_input_embeddings().embedding_dim)
    dropout = float(config.get("variate_dropout", 0.1))
    variate = VariateEmbedding(encoder.dim, int(config.get("variate_mlp_hidden_dim", 3072)), dropout)
    projector = SeriesProjector(encoder.dim, d_model, int(config.get("projector_hidden_dim", 2048)), dropout)
    modules = torch.load(root / "ts_modules.pt", map_location="cpu", weights_only=True)
    try:
        variate.load_state_dict(modules["variate_embedding"])
        projector.load_state_dict(modules["ts_projector"])
    except (KeyError, RuntimeError) as exc:
        raise ModelUnavailableError(
            f"{root / 'ts_modules.pt'} does not fit ({str(exc).splitlines()[0][:160]})"
        ) from None
    model = TotoQA(encoder, variate, projector, vlm, processor, settings)
    model.checkpoint = str(root.resolve())
    return model.to(device=device, dtype=dtype).eval()


def text_decoder_targets(targets: tuple[str, ...]) -> str | list[str]:
    """The LoRA targets on the text decoder only (Appendix C), never the vision tower's layers."""
    if targets == ("all-linear",):
        return r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)$"
    return r".*language_model.*\.(" + "|".join(targets) + r")$"


def with_lora(model, lora, seed: int = 0):
    """The paper's LoRA (r 16, alpha 32, dropout 0.05, no bias, q_proj / v_proj) on the text decoder."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        bias="none",
        target_modules=text_decoder_targets(tuple(lora.targets)),
    )
    model.vlm = get_peft_model(model.vlm, config)
    return model


def build_for_sft(name: str, settings: TSLMSettings, lora, seed: int = 0):
    """The checkpoint's TotoQA with a fresh LoRA on its text decoder (the only trainable part)."""
    model = load_checkpoint(name, settings)
    model = with_lora(model, lora, seed)
    model.to(model.device)
    return model


def save_run(model, out: Path, lora, extra: dict | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_trainable(out / WEIGHTS_FILE)
    record = {"arch": "toto", "base": model.checkpoint, "settings": asdict(model.settings), "lora": asdict(lora)}
    (out / RUN_FILE).write_text(json.dumps({**record, **(extra or {})}, indent=2, default=list), encoding="utf-8")
    return out


def is_run_dir(path: str | Path) -> bool:
    return (Path(path).expanduser() / RUN_FILE).is_file()


def load_any(name: str, **given):
    """`toto/<checkpoint>` ("No SFT") or `toto/<SFT run dir>` (the base checkpoint plus its trained LoRA).
    `given`: TSLMSettings fields of this evaluation (device, toto_max_length, ...); a run keeps the rest
    of its training settings."""
    from tsbench.models.tslm.build import LoraSpec

    given = {k: v for k, v in given.items() if v is not None}
    run_dir = Path(name).expanduser()
    if not is_run_dir(run_dir):
        return load_checkpoint(name, TSLMSettings(**given))
    record = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    trained = TSLMSettings(**{**record["settings"], "device": None, **given})
    spec = record["lora"]
    lora = LoraSpec(spec["r"], spec["alpha"], spec["dropout"], tuple(spec["targets"]))
    model = with_lora(load_checkpoint(record["base"], trained), lora)
    model.to(model.device)
    model.load_trainable(run_dir / WEIGHTS_FILE, f"the LoRA of {record['base']}")
    return model.eval()
