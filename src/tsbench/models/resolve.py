"""The one resolver for local weights: `local/smollm2-135m`, `local/<dir>` (a Hugging Face model
or a PEFT adapter on a local base), a directory path, or a hub id. Eval, SFT and GRPO all load
through it, so an adapter means the same thing everywhere."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from tsbench.models.local_hf import SMOLLM2_NAME, ensure_smollm2_cache


@dataclass(frozen=True)
class ModelSource:
    weights: str  # directory or hub id of the (base) weights
    adapter: str | None = None  # a PEFT LoRA adapter directory on top of them
    base_record: str = ""  # what a saved adapter names as its base: "smollm2-135m", a directory or a hub id
    local: bool = True  # load without touching the network


def resolve_model(spec: str) -> ModelSource:
    """`local/smollm2-135m`, `local/<dir>` (HF model or LoRA adapter), a directory path, or a hub id."""
    spec = spec.strip()
    if not spec:
        raise ValueError("--model is required")
    if spec.startswith("local/"):
        name = spec[len("local/") :]
        if name == SMOLLM2_NAME:
            cache_dir, _ = ensure_smollm2_cache()
            return ModelSource(str(cache_dir), None, SMOLLM2_NAME, True)
        if name == "tiny-random-vlm":  # a random Qwen2.5-VL for CPU smoke runs (models/local_vlm.py)
            from tsbench.models.local_vlm import ensure_tiny_vlm

            return resolve_model(f"local/{ensure_tiny_vlm()}")
        path = Path(name).expanduser()
        if (path / "adapter_config.json").is_file():
            base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
            if not base:
                raise ValueError(f"{path}/adapter_config.json names no base_model_name_or_path")
            inner = resolve_model(f"local/{base}" if base == SMOLLM2_NAME or Path(base).expanduser().is_dir() else base)
            return replace(inner, adapter=str(path.resolve()))
        if (path / "config.json").is_file():
            return ModelSource(str(path.resolve()), None, str(path.resolve()), True)
        raise ValueError(
            f"local model not found: {name!r} (give {SMOLLM2_NAME!r} or a directory holding a "
            "Hugging Face model or a PEFT adapter)"
        )
    if Path(spec).expanduser().is_dir():
        return resolve_model(f"local/{spec}")
    return ModelSource(spec, None, spec, False)
