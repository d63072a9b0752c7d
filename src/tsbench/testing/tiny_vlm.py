"""A tiny randomly initialised Qwen2.5-VL for fast CPU tests of vision-language plumbing (eval, SFT, GRPO).

It is the paper's architecture (TimeMaster trains Qwen2.5-VL-3B) at toy sizes: a 2-block vision tower,
the patch merger, a 2-layer language model. The tokenizer is word-level over a few words plus Qwen's
vision markers, so the LM head has a few dozen rows and a CPU trains it in seconds; the image processor
caps an image at `image_tokens` merged patches. It is saved as a plain Hugging Face directory (model,
tokenizer, processor, chat template) that `local/<dir>` loads through AutoModelForImageTextToText.
"""

from __future__ import annotations

from pathlib import Path

from tsbench.testing.tiny import word_level_tokenizer

VISION_TOKENS = ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>")
# Whole TimeMaster answers are single words too, so a random policy names a class now and then (a reward signal).
WORDS = (
    *("a", "b", "c", "d", "e", "f", "g", "h", "up", "down", "rising", "falling"),
    *("<think>", "</think>", "<class>", "</class>", "<class>rising</class>", "<class>falling</class>"),
)
# ChatML with typed content parts: {"type": "image"} renders as one vision span the processor expands.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} "
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for part in m['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|> "
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def make_tiny_random_vlm(
    path: str | Path, *, words: tuple[str, ...] = WORDS, image_tokens: int = 8, hidden: int = 32, seed: int = 0
) -> Path:
    """Write a random Qwen2_5_VLForConditionalGeneration (~100k parameters) and its processor to `path`."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
    )
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer, vocab = word_level_tokenizer(words, chat_template=CHAT_TEMPLATE, extra_special=VISION_TOKENS)
    patch = 28  # patch_size 14 x spatial_merge_size 2: one merged token per 28 x 28 pixels
    image_processor = Qwen2VLImageProcessorPil(  # PIL backend: no torchvision needed
        min_pixels=patch * patch, max_pixels=patch * patch * image_tokens, patch_size=14, merge_size=2
    )
    try:
        processor = Qwen2_5_VLProcessor(
            image_processor=image_processor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE
        )
    except (ImportError, AttributeError, TypeError):  # no torchvision: no video part (models/local_vlm.py)
        from tsbench.models.local_vlm import image_only

        processor = image_only(Qwen2_5_VLProcessor)(image_processor, tokenizer, chat_template=CHAT_TEMPLATE)
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": hidden,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 0,
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": hidden,
            "fullatt_block_indexes": [1],
            "window_size": 56,
        },
        **vision_token_ids(vocab),
        tie_word_embeddings=False,
    )
    return save_random_vlm(Qwen2_5_VLForConditionalGeneration, config, processor, path, seed)


def vision_token_ids(vocab: dict[str, int]) -> dict[str, int]:
    """The config's ids of the Qwen-VL vision tokens, from the word-level vocabulary."""
    return {
        "image_token_id": vocab["<|image_pad|>"],
        "video_token_id": vocab["<|video_pad|>"],
        "vision_start_token_id": vocab["<|vision_start|>"],
        "vision_end_token_id": vocab["<|vision_end|>"],
    }


def save_random_vlm(model_class, config, processor, path: str | Path, seed: int) -> Path:
    """A randomly initialised `model_class(config)` (seeded) and `processor`, saved to `path`."""
    import torch
    from transformers import GenerationConfig

    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config = GenerationConfig(eos_token_id=2, pad_token_id=0, bos_token_id=1)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    processor.save_pretrained(path)
    return path
