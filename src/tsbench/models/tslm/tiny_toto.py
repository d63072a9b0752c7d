"""A tiny random Toto-1.0-QA checkpoint in ARFBench's layout, for offline CPU runs, tests and measurements.

config.json (model_type vlm_with_timeseries), vlm/ (a tiny random Qwen3-VL, the paper's backbone
family, with tiny_vlm.py's word-level tokenizer; its processor at the root as ARFBench saves it),
ts_modules.pt (random variate embedding and projector) and toto/ (a small random Toto from Datadog's
own model code). Nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

VARIATE_HIDDEN = 64
PROJECTOR_HIDDEN = 48


def make_tiny_qwen3_vl(path: str | Path, *, hidden: int = 32, image_tokens: int = 8, seed: int = 0) -> Path:
    """A random Qwen3VLForConditionalGeneration (~150k parameters: 2 vision blocks with a deepstack
    merger, 2 text layers) and its image-only processor, written to `path`."""
    from transformers import (
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
    )
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from tsbench.models.local_vlm import image_only
    from tsbench.models.tiny_vlm import (
        CHAT_TEMPLATE,
        VISION_TOKENS,
        WORDS,
        save_random_model,
        vision_token_ids,
        word_level_tokenizer,
    )

    tokenizer, vocab = word_level_tokenizer(WORDS, chat_template=CHAT_TEMPLATE, extra_special=VISION_TOKENS)
    merged = 32  # Qwen3-VL: patch 16 x spatial merge 2 pixels per merged image token
    images = Qwen2VLImageProcessorPil(
        min_pixels=merged * merged, max_pixels=merged * merged * image_tokens, patch_size=16, merge_size=2
    )
    try:
        processor = Qwen3VLProcessor(image_processor=images, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)
    except (ImportError, AttributeError, TypeError):  # no torchvision: no video part (models/local_vlm.py)
        processor = image_only(Qwen3VLProcessor)(images, tokenizer, chat_template=CHAT_TEMPLATE)
    text = {"vocab_size": len(vocab), "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": 2}
    text |= {"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 4096}
    text |= {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": hidden}
    vision |= {
        "patch_size": 16,
        "spatial_merge_size": 2,
        "deepstack_visual_indexes": [0],
        "num_position_embeddings": 64,
    }
    config = Qwen3VLConfig(
        text_config={**text, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0},
        vision_config=vision,
        **vision_token_ids(vocab),
        tie_word_embeddings=False,
    )
    return save_random_model(Qwen3VLForConditionalGeneration, config, processor, path, seed)


def make_tiny_toto_checkpoint(
    path: str | Path, *, seed: int = 0, hidden: int = 32, toto_config: dict | None = None
) -> Path:
    """`toto_config`: the Toto's sizes (default tiny_toto_config(); base_toto_config() is Toto-Open-Base-1.0's)."""
    import torch

    from tsbench.models.tslm.toto_checkpoint import MODEL_TYPE
    from tsbench.models.tslm.toto_encoder import random_toto, save_toto, tiny_toto_config
    from tsbench.models.tslm.toto_qa import SeriesProjector, VariateEmbedding

    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    vlm = make_tiny_qwen3_vl(root / "vlm", hidden=hidden, seed=seed)
    for name in vlm.iterdir():  # ARFBench keeps the processor at the checkpoint root
        if name.name not in ("config.json", "generation_config.json") and not name.name.startswith("model"):
            shutil.copy(name, root / name.name)
    toto_config = toto_config or tiny_toto_config()
    embed_dim = int(toto_config["embed_dim"])
    save_toto(random_toto(toto_config, seed), toto_config, root / "toto")
    torch.manual_seed(seed + 1)
    variate = VariateEmbedding(embed_dim, VARIATE_HIDDEN, 0.1)
    projector = SeriesProjector(embed_dim, hidden, PROJECTOR_HIDDEN, 0.1)
    torch.save(
        {"variate_embedding": variate.state_dict(), "ts_projector": projector.state_dict()}, root / "ts_modules.pt"
    )
    config = {
        "model_type": MODEL_TYPE,
        "use_timeseries": True,
        "toto_model_name": "Datadog/Toto-Open-Base-1.0",
        "freeze_toto": True,
        "variate_mlp_hidden_dim": VARIATE_HIDDEN,
        "projector_hidden_dim": PROJECTOR_HIDDEN,
        "variate_dropout": 0.1,
    }
    (root / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return root
