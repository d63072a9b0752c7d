"""TimeClaw's episodic multimodal memory: series fingerprints, context embeddings, bank, retrieval.

    from tsbench.timeclaw import build_memory, fingerprint, load_bank
    build_memory("results/<run>", min_score=0.5, out="banks/<name>.parquet")

Heavy parts (the sentence encoder, the dataset reader) load lazily.
"""

from __future__ import annotations

from typing import Any

from tsbench.timeclaw.bank import MemoryBank, Precedent, load_bank, recall, render_precedents
from tsbench.timeclaw.fingerprint import DIM, FEATURE_NAMES, fingerprint, fingerprint_dict


def build_memory(*args: Any, **kwargs: Any):
    """See tsbench.timeclaw.build.build_memory."""
    from tsbench.timeclaw.build import build_memory as build

    return build(*args, **kwargs)


__all__ = [
    "DIM",
    "FEATURE_NAMES",
    "MemoryBank",
    "Precedent",
    "build_memory",
    "fingerprint",
    "fingerprint_dict",
    "load_bank",
    "recall",
    "render_precedents",
]
