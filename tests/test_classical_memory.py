"""Classical training holds a few rows' values whatever the train split's size (issue 49).

The same training data path (features extracted, examples turned into head tables) runs on a
3-row and a 12-row train split of 131,072-sample rows (512 KiB each: a parquet page, about 1 MiB, holds
two, so the reader's one-page granularity is not mistaken for a row count). Memory is counted as bytes allocated, not
pages the OS kept: traced Python/numpy allocations plus pyarrow's own pool, through a proxy pool
whose peak starts at zero. The nine more rows bring 9 x 512 KiB of float32 values; the peak may
grow by what their features and index rows take, never by a sizeable share of their values (a
reader that buffers a row group, as before, grew by all of them).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split

pytest.importorskip("xgboost")
pytest.importorskip("stumpy")

LENGTH = 131_072


def _split(root: Path, rows: int) -> Path:
    cfg = preset("small", categories=("localize",), single_lengths=(LENGTH,), train_rows=rows)
    generate_split(cfg, "train", root)
    return root / "seed42"


def _peak(data: Path, out: Path) -> int:
    """Peak bytes (traced + pyarrow) while extracting the split's features and building its tables."""
    import pyarrow as pa

    from tsbench.baselines import classical, feature_cache

    files = classical.data_files(data)
    default = pa.default_memory_pool()
    proxy = pa.proxy_memory_pool(default)
    pa.set_memory_pool(proxy)
    tracemalloc.start()
    try:
        cache = feature_cache.extract_features(files, out, workers=1)
        tables = classical.head_tables(classical.iter_examples(files, cache))
        traced = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(default)
    assert tables[("precise", "localize.present")][1].dtype.name == "float32"
    return traced + proxy.max_memory()


def test_training_memory_does_not_grow_with_the_rows(tmp_path):
    from tsbench.baselines import features as F

    F.warm_up()  # stumpy's kernels loaded before anything is counted
    _peak(_split(tmp_path / "w", 1), tmp_path / "w-features")  # first-use allocations (imports) are not the rows'
    small = _peak(_split(tmp_path / "s", 3), tmp_path / "s-features")
    large = _peak(_split(tmp_path / "l", 12), tmp_path / "l-features")
    extra_values = (12 - 3) * LENGTH * 4  # float32 bytes the nine more rows bring
    assert large - small < extra_values / 4, (small, large, extra_values)
