"""An offline Hugging Face cache holding the models of experiments/ without weights (tests/fixtures/hub):
each model's config.json, image processor settings and chat template, with a stand-in tokenizer
(SmolLM2's real BPE vocabulary plus the model's special tokens; see fixtures/hub/SOURCES.md)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "hub"
SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)


def model_files(name: str, into: Path) -> Path:
    """`into` holding fixture model `name`'s files and its stand-in tokenizer (as a model directory)."""
    from transformers import AutoTokenizer

    from tsbench.models.local_hf import ensure_smollm2_cache

    source = FIXTURES / name
    into.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.suffix == ".json":
            shutil.copy(path, into / path.name)
    smollm2, _ = ensure_smollm2_cache()
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2), local_files_only=True)
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIALS)}, replace_extra_special_tokens=False)
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    tokenizer.chat_template = (source / "chat_template.jinja").read_text()
    tokenizer.save_pretrained(into)
    return into


def offline_hub(root: Path) -> Path:
    """A HF_HUB_CACHE under `root` with every fixture model as a cached snapshot (`Qwen/Qwen3.5-4B`, ...)."""
    cache = root / "hub"
    for source in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        org, name = source.name.split("--", 1)
        revision = hashlib.sha1(source.name.encode()).hexdigest()
        repo = cache / f"models--{org}--{name}"
        model_files(source.name, repo / "snapshots" / revision)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    return cache
