"""Refactors must not change results: the small preset's bytes and scripted/zscore's scores are pinned.

The values were produced before the Taskset redesign. A deliberate change to the generator or to
a question text changes them: update them in the same commit and say why.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split

SMALL_SHA256 = {
    "test-precise.parquet": "f37c2b89042f9540952ac2759fcedf663c5ea206c5d816fdb5d197d3e5097001",
    "test-coarse.parquet": "1d4c9c5a0a314b268a225464d1275fd5461b061362ebb2d5c751b6e562bc904a",
    "val-precise.parquet": "ab0d73bbd1ac0fb11abd6a64f9c36bf375e318cead14547d24b67a3302519086",
    "val-coarse.parquet": "f3a5d403c149bd0a3a7a32d1d531a15948d4250ab06c56f580e6340f64d231c2",
}
ZSCORE_RLM = {
    "test-classify_with_evidence-1024-00000": 0.6547619048,
    "test-classify_with_evidence-2048-00002-categorization": 1.0,
    "test-lead_lag_with_magnitude-2048-00000": 0.0,
    "test-lead_lag_with_magnitude-2048-00000-indicator": 0.0,
    "test-localize-1024-00000": 0.0,
    "test-localize-1024-00001-presence": 1.0,
    "test-localize-1024-00001-start_time": 1.0,
    "test-localize_all_channels-2048-00000": 0.5,
    "test-localize_all_channels-2048-00000-identification": 0.0,
    "test-measure_magnitude-1024-00000": 0.0,
    "test-measure_magnitude-1024-00002-magnitude_band": 0.0,
}


def test_small_preset_bytes_are_pinned(tmp_path):
    cfg = preset("small")
    for split in ("test", "val"):
        generate_split(cfg, split, tmp_path)
    for name, digest in SMALL_SHA256.items():
        assert hashlib.sha256((tmp_path / "seed42" / name).read_bytes()).hexdigest() == digest, name


def test_scripted_zscore_scores_are_pinned(small_data, tmp_path):
    cfg = build(EvalConfig, {"model": "scripted/zscore", "harness": "rlm", "data": [str(small_data)],
                             "sample_ids": list(ZSCORE_RLM), "concurrency": 2, "out": str(tmp_path / "run")})
    samples = pd.read_parquet(run_eval(cfg) / "samples.parquet")
    assert dict(zip(samples["id"], samples["score"].round(10))) == ZSCORE_RLM
