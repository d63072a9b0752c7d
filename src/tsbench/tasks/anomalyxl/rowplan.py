"""Plan a row (decide scene, anomaly, gold, question), then materialize its arrays only when needed.

A row's plan is a JSON-able dict holding every decision; `materialize(plan)` rebuilds the exact
float32 values from it alone, which is how rows are verified, projected and regenerated.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future

import numpy as np

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import category_module
from tsbench.tasks.anomalyxl.injections import apply_injection
from tsbench.tasks.anomalyxl.rows import Row
from tsbench.tasks.anomalyxl.scene import build_scene, plan_scene
from tsbench.tasks.anomalyxl.seeds import PLAN_STREAM, SCENE_STREAM, derive_seed, row_rng

PLAN_VERSION = 1


def row_id(split: str, category: str, length: int, index: int) -> str:
    return f"{split}-{category}-{length}-{index:05d}"


def plan_row(cfg, split: str, category: str, length: int, index: int) -> Row:
    anomaly = category_module(category).plan(
        row_rng(cfg.seed, split, category, length, index, PLAN_STREAM), length, cfg
    )
    scenes = []
    for c in range(len(anomaly.channel_names)):
        scene_rng = np.random.default_rng(derive_seed(cfg.seed, split, category, length, index, SCENE_STREAM, c))
        scenes.append(plan_scene(scene_rng, cfg.noise_weights, cfg.p_periodic, cfg.p_trend))
    rid = row_id(split, category, length, index)
    plan = {
        "version": PLAN_VERSION,
        "key": {"seed": cfg.seed, "split": split, "category": category, "length": length, "index": index},
        "scenes": scenes,
        "injections": anomaly.injections,
    }
    return Row(
        id=rid,
        split=split,
        regime=lb.regime_of(category),
        category=category,
        length=length,
        channel_names=anomaly.channel_names,
        question=anomaly.question,
        options=[],
        gold=anomaly.gold,
        plan=plan,
        seed=cfg.seed,
        source_id=rid,
        facts=anomaly.facts,
    )


_work = threading.local()


def _buffers(length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three float64 arrays of `length` kept per thread: fresh 1 MB arrays per channel cost page faults."""
    cache = _work.__dict__.setdefault("buffers", {})
    if length not in cache:
        if len(cache) >= 4:
            cache.clear()
        cache[length] = (np.empty(length), np.empty(length), np.empty(length))
    return cache[length]


def _channel(plan: dict, c: int, out: np.ndarray) -> None:
    injections = [inj for inj in plan["injections"] if inj["channel"] == c]
    if not injections:  # the scene's last step writes the float32 row itself
        build_scene(plan["scenes"][c], out.shape[1], _buffers(out.shape[1]), out=out[c])
        return
    x = build_scene(plan["scenes"][c], out.shape[1], _buffers(out.shape[1]))
    for inj in injections:
        apply_injection(x, inj)
    out[c] = x


def materialize(plan: dict, out: np.ndarray | None = None, pool: Executor | None = None) -> np.ndarray:
    """(channels, L) float32 values, bit-identical for the same plan; written into `out` when given
    (a writer's row-group buffer, so the values are not copied again). With `pool`, the channels are
    built on its threads (numpy releases the GIL); each channel's values are its own either way."""
    length = plan["key"]["length"]
    if out is None:
        out = np.empty((len(plan["scenes"]), length), dtype=np.float32)
    if pool is None:
        for c in range(len(out)):
            _channel(plan, c, out)
    else:
        for done in synthesize(plan, out, pool):
            done.result()
    return out


def synthesize(plan: dict, out: np.ndarray, pool: Executor) -> list[Future]:
    """Start building `plan`'s channels into `out` on `pool`: `out` holds the values once every
    returned future is done. Lets a writer keep several rows in flight."""
    return [pool.submit(_channel, plan, c, out) for c in range(len(out))]
