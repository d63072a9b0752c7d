"""Refactors must not change results: the small preset's bytes and scripted/zscore's scores are pinned.

The values were produced before the Taskset redesign. A deliberate change to the generator or to
a question text changes them: update them in the same commit and say why.

Changed by issue 16: question texts now state the facts the authors' texts give the model (unit
scaling, window widths, kinds and sizes, lead-lag offsets at most L/4, quarter edges), and MCQ golds
list their options (so `valid` can mean "one of the options"). Only the `question` column (precise)
and the `question` and `gold` columns (coarse) changed; `values` and `plan` are byte-identical, and
the scripted scores below did not move.

Changed by issue 26: the float `values` column is written PLAIN, without a dictionary and without
min/max statistics (series_file.writer_options), so every file's bytes changed (about a third smaller);
the decoded tables are identical (`pyarrow.Table.equals` on all four files), and so are the scores.
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
    "test-precise.parquet": "d92a2f149e62b95a49f8b35c4f1bb3717518e6cb00bd1b3382b94fb8cd91e159",
    "test-coarse.parquet": "b0f8069d7a4c8a655267822b2591e13e37d34a39c43698fe94fbc611e51124f5",
    "val-precise.parquet": "7a03c79e8937950e4d13cce10f1c5f8a81d6d4bfcaff22728dc689b0a617e97c",
    "val-coarse.parquet": "493b5f01dc88df079660d9ab0181e01f14596d3edbed7defa93daf3cea7027d0",
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
    cfg = build(
        EvalConfig,
        {
            "model": "scripted/zscore",
            "harness": "rlm",
            "data": [str(small_data)],
            "sample_ids": list(ZSCORE_RLM),
            "concurrency": 2,
            "out": str(tmp_path / "run"),
        },
    )
    samples = pd.read_parquet(run_eval(cfg) / "samples.parquet")
    assert dict(zip(samples["id"], samples["score"].round(10))) == ZSCORE_RLM
