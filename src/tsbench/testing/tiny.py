"""A tiny randomly initialised Llama for fast CPU tests of training code (SFT here; usable by any trainer).

It borrows SmolLM2-135M-Instruct's tokenizer and chat template (from the local cache that
`local/smollm2-135m` uses), so prompts render exactly as they do for a real local model, and it
is saved as a plain Hugging Face model directory: `local/<dir>` loads it.
"""

from __future__ import annotations

from pathlib import Path


def make_tiny_random_llama(path: str | Path, *, hidden_size: int = 64, layers: int = 2, heads: int = 4,
                           kv_heads: int = 2, intermediate_size: int = 128, context: int = 8192, seed: int = 0) -> Path:
    """Write a random LlamaForCausalLM (about 3M parameters, tied embeddings) and its tokenizer to `path`."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    from tsbench.models.local_hf import ensure_smollm2_cache

    tokenizer_dir, _ = ensure_smollm2_cache()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=context, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path
