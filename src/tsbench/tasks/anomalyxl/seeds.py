"""Row seeds: every random draw of a row comes from a hash of where the row sits in the grid.

Hashing (rather than one sequential generator) is what lets the grid grow, or the scene code
change, without moving any existing row's anomaly: the planning stream and the scene stream are
separate, and neither depends on how many rows came before.
"""

from __future__ import annotations

import hashlib

import numpy as np

PLAN_STREAM = "plan"
SCENE_STREAM = "scene"
MCQ_STREAM = "mcq"


def derive_seed(*parts: object) -> int:
    """A 63-bit integer from blake2b over the parts joined with '|'."""
    text = "|".join(str(p) for p in parts)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def row_rng(seed: int, split: str, category: str, length: int, index: int, stream: str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, split, category, length, index, stream))
