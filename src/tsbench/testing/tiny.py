"""A tiny randomly initialised Llama for fast CPU tests of training code (SFT here; usable by any trainer).

It borrows SmolLM2-135M-Instruct's tokenizer and chat template (from the local cache that
`local/smollm2-135m` uses), so prompts render exactly as they do for a real local model, and it
is saved as a plain Hugging Face model directory: `local/<dir>` loads it.
"""

from __future__ import annotations

from pathlib import Path

from tsbench.models.tiny_vlm import save_random_model, word_level_tokenizer


def make_tiny_random_llama(
    path: str | Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int = 128,
    context: int = 8192,
    seed: int = 0,
) -> Path:
    """Write a random LlamaForCausalLM (about 3M parameters, tied embeddings) and its tokenizer to `path`."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    from tsbench.models.local_hf import ensure_smollm2_cache

    tokenizer_dir, _ = ensure_smollm2_cache()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=context,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id
    )
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


SMALL_VOCAB_WORDS = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p")


def make_small_vocab_llama(path: str | Path, *, words: tuple[str, ...] = SMALL_VOCAB_WORDS, seed: int = 0) -> Path:
    """A random 2-layer Llama whose word-level tokenizer knows only `words`, the chat markers and <unk>.

    Every other word is <unk>, so prompts still render through a real chat template (ChatML-like,
    incremental), while the LM head has ~25 rows instead of 49k: training steps on a CPU take
    milliseconds instead of seconds (TRL scores every position over the whole vocabulary there)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer, vocab = word_level_tokenizer(
        words,
        chat_template=(
            "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
            "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
        ),
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    return save_random_model(LlamaForCausalLM, config, tokenizer, path, seed)
