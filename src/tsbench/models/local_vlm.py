"""In-process vision-language models (`local/<dir>` holding any image-text-to-text model transformers
loads, e.g. Qwen2.5-VL): PNG images in the messages reach the model as pixels, never dropped.

The conversation is put in TRL's multimodal form (`trl.data_utils.prepare_multimodal_messages`: image
placeholders before the text of the first user message), rendered by the processor's chat template
and encoded by the processor, so eval, SFT and GRPO rollouts all see an image exactly as TRL's loss
forward re-renders it. Generation keeps the exact prompt and output ids, as `local_hf` does.
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbench.models.base import Agent, Completion, Message, ModelError, TaskInfo
from tsbench.models.local_hf import (
    _default_device,
    _resolve_dtype,
    dtype_option,
    local_completion,
    offline_transformers,
    pad_token_id,
    sampling_options,
)
from tsbench.models.streaming import MeterStreamer
from tsbench.models.torch_threads import set_torch_threads

# Keys of a processor's output that are per token (padded with the ids), not per image.
PER_TOKEN_KEYS = ("token_type_ids", "mm_token_type_ids")


def is_vision_language(weights: str | Path) -> bool:
    """Whether the model directory holds an image-text-to-text model (by its config's model_type)."""
    config = Path(weights) / "config.json"
    if not config.is_file():
        return False
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return json.loads(config.read_text()).get("model_type") in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def load_processor(where: str | Path, *, local: bool = True) -> Any:
    """AutoProcessor, or, without torchvision (transformers 5 builds neither a video processor nor the
    torchvision image processors a published Qwen-VL config names without it; tsbench sends images only),
    the same processor class with the PIL image processor and the tokenizer as its only parts."""
    transformers = offline_transformers()
    try:
        return transformers.AutoProcessor.from_pretrained(str(where), local_files_only=local)
    except (ImportError, AttributeError, TypeError, ValueError, OSError) as exc:
        if "video" not in str(exc).lower() and "torchvision" not in str(exc).lower():
            raise
    images = transformers.AutoImageProcessor.from_pretrained(str(where), local_files_only=local, backend="pil")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(where), local_files_only=local)
    return image_only(_processor_class(where))(images, tokenizer, chat_template=tokenizer.chat_template)


def _processor_class(where: str | Path) -> type:
    transformers = offline_transformers()
    for name in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        path = Path(where) / name
        if path.is_file():
            found = json.loads(path.read_text()).get("processor_class")
            if found and hasattr(transformers, found):
                return getattr(transformers, found)
    raise ModelError("bad_request", f"{where} names no processor_class transformers knows")


def image_only(processor_class: type) -> type:
    """The processor class with only an image processor and a tokenizer as its parts."""

    class ImageOnly(processor_class):  # type: ignore[misc, valid-type]
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            processor_class.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    ImageOnly.__name__ = ImageOnly.__qualname__ = processor_class.__name__
    return ImageOnly


def pil_images(pngs: list[bytes]) -> list[Any]:
    from PIL import Image

    return [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]


@dataclass
class Encoded:
    """One prompt through the processor: its ids, the vision inputs generate and the loss need, and the
    conversation (string contents) and images that TRL re-renders for its loss forward."""

    ids: list[int]
    inputs: dict[str, Any] = field(default_factory=dict)  # pixel_values, image_grid_thw, mm_token_type_ids, ...
    conversation: list[dict[str, Any]] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)  # PIL images, in placeholder order


def encode_messages(processor: Any, messages: list[Message], *, generation_prompt: bool = True) -> Encoded:
    """Render and encode `messages`, each message's images as image parts before its text. With images on
    the first user message only, that is exactly TRL's `prepare_multimodal_messages` form (what its loss
    forward re-renders); eval's later observations (rlm-image) may carry images too."""
    parts = [
        {
            "role": m.role,
            "content": [{"type": "image"} for _ in m.images] + [{"type": "text", "text": m.content}],
        }
        for m in messages
    ]
    conversation = [{"role": m.role, "content": m.content} for m in messages]
    images = pil_images([png for m in messages for png in m.images])
    text = processor.apply_chat_template(parts, tokenize=False, add_generation_prompt=generation_prompt)
    if not images:
        return Encoded(list(processor.tokenizer(text, add_special_tokens=False)["input_ids"]), {}, conversation, [])
    out = processor(text=[text], images=images, return_tensors="pt")
    inputs = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask")}
    return Encoded(out["input_ids"][0].tolist(), inputs, conversation, images)


class LocalVLMModel(Agent):
    """A ChatModel over an image-text-to-text model in this process, one call at a time."""

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
        from tsbench.models.resolve import resolve_model

        self.threads = set_torch_threads(threads)
        self.name = name or f"local/{name_or_path}"
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.device = device or _default_device()
        self._lock = threading.Lock()
        self._calls = 0
        source = resolve_model(f"local/{name_or_path}")
        self.weights_dir = Path(source.weights)
        transformers = offline_transformers()
        processor_dir = source.adapter if source.adapter and _has_processor(Path(source.adapter)) else source.weights
        self.processor = load_processor(processor_dir)
        model = transformers.AutoModelForImageTextToText.from_pretrained(
            source.weights, local_files_only=True, **dtype_option(_resolve_dtype(dtype, self.device))
        )
        if source.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, source.adapter, is_trainable=False).merge_and_unload()
        self.model = model.to(self.device).eval()

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion:
        """Greedy unless a positive temperature is given (local_hf.sampling_options)."""
        import torch

        with self._lock:
            if self.model is None:
                raise RuntimeError(f"{self.name} is closed")
            started = time.perf_counter()
            encoded = encode_messages(self.processor, messages)
            context = getattr(
                getattr(self.model.config, "text_config", self.model.config), "max_position_embeddings", 0
            )
            if context and len(encoded.ids) >= context:
                raise ModelError("bad_request", f"prompt of {len(encoded.ids)} tokens does not fit {self.name}")
            options = sampling_options(max_tokens or self.max_new_tokens, temperature, self.seed + self._calls)
            placeholders = [getattr(self.model.config, k, None) for k in ("image_token_id", "video_token_id")]
            if any(isinstance(i, int) for i in placeholders):  # never generate an image placeholder
                options["suppress_tokens"] = [i for i in placeholders if isinstance(i, int)]
            self._calls += 1
            tokenizer = self.processor.tokenizer
            ids = torch.tensor([encoded.ids], device=self.device)
            inputs = {k: v.to(self.device) for k, v in encoded.inputs.items()}
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    pad_token_id=pad_token_id(tokenizer),
                    **inputs,
                    streamer=MeterStreamer(),
                    **options,
                )
            output_ids = out[0, len(encoded.ids) :].tolist()
            extra = {"device": self.device, "threads": self.threads, "images": len(encoded.images)}
            return local_completion(self.model, tokenizer, list(encoded.ids), output_ids, started, extra)

    def close(self) -> None:
        self.model = None
        self.processor = None


def _has_processor(folder: Path) -> bool:
    return any((folder / n).is_file() for n in ("processor_config.json", "preprocessor_config.json"))


def names_vision_language(name: str) -> bool:
    """Whether `local/<name>` (a model or an adapter on one) is a vision-language model."""
    from tsbench.models.local_hf import SMOLLM2_NAME
    from tsbench.models.resolve import resolve_model

    if name == SMOLLM2_NAME:
        return False
    try:
        return is_vision_language(resolve_model(f"local/{name}").weights)
    except ValueError:
        return False  # LocalHFModel reports the missing model in its own words


TINY_VLM_NAME = "tiny-random-vlm"  # `local/tiny-random-vlm`: CPU smoke runs on a fresh clone, nothing downloaded
_tiny_lock = threading.Lock()


def ensure_tiny_vlm() -> Path:
    """A tiny random Qwen2.5-VL (models/tiny_vlm.py, seed 0) built once under the cache dir."""
    from tsbench.models.local_hf import build_atomically, cache_root
    from tsbench.models.tiny_vlm import WORDS, make_tiny_random_vlm

    target = cache_root() / "models" / TINY_VLM_NAME
    marker, version = target / "tsbench-tiny.json", json.dumps({"words": WORDS, "seed": 0})

    def write(staging: Path) -> None:
        make_tiny_random_vlm(staging)
        (staging / marker.name).write_text(version)

    with _tiny_lock:
        if not (marker.is_file() and marker.read_text() == version):
            build_atomically(target, write, marker.is_file)  # replaces an older build
    return target
