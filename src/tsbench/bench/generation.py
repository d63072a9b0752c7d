"""Generator throughput against a floor: numpy drawing as many float32 normals, written to parquet alike."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.bench.common import measure_in_child
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, plan_split
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, select_sources
from tsbench.tasks.anomalyxl.rows import COMPRESSION, ROW_GROUP_BYTES
from tsbench.tasks.series_file import values_array


def _shapes(preset_name: str) -> list[tuple[int, int]]:
    """(channels, L) of every row written, precise and coarse, in order."""
    cfg = preset(preset_name)
    plans = plan_split(cfg, "test")
    sources = select_sources(plans, "test", cfg.seed)
    shapes = []
    for p in plans:
        copies = 1 + (len(TEMPLATES_BY_SOURCE[p.category]) if p.id in sources else 0)
        shapes.extend([(len(p.channel_names), p.length)] * copies)
    return shapes


def run_generator(preset_name: str, out: str) -> int:
    entry = generate_split(preset(preset_name), "test", out)
    return sum(f["bytes"] for f in entry["files"].values())


def run_floor(preset_name: str, out: str) -> int:
    rng = np.random.default_rng(0)
    schema = pa.schema([("values", pa.list_(pa.list_(pa.float32())))])
    path = Path(out) / "floor.parquet"
    with pq.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        pending, size = [], 0
        for c, n in _shapes(preset_name):
            block = rng.standard_normal((c, n), dtype=np.float32)
            pending.append(block)
            size += block.nbytes
            if size >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_arrays([values_array(pending)], schema=schema))
                pending, size = [], 0
        if pending:
            writer.write_table(pa.Table.from_arrays([values_array(pending)], schema=schema))
    return path.stat().st_size


def main(preset_name: str = "paper") -> dict:
    rows = len(plan_split(preset(preset_name), "test"))
    values = sum(c * n for c, n in _shapes(preset_name))
    with tempfile.TemporaryDirectory() as tmp:
        gen_s, gen_rss, gen_bytes = measure_in_child(run_generator, preset_name, tmp)
        floor_s, floor_rss, _ = measure_in_child(run_floor, preset_name, tmp)
    mb = values * 4 / 2**20
    result = {
        "rows": rows,
        "values": values,
        "generator_s": gen_s,
        "rows_per_s": rows / gen_s,
        "MB_per_s": mb / gen_s,
        "peak_rss_GiB": gen_rss / 2**30,
        "floor_s": floor_s,
        "floor_peak_rss_GiB": floor_rss / 2**30,
        "ratio": gen_s / floor_s,
        "file_MB": gen_bytes / 2**20,
    }
    print(
        f"generate ({preset_name} test split, {rows} precise rows + MCQ, {mb:.0f} MB of float32):\n"
        f"  generator {gen_s:6.2f} s  {rows / gen_s:6.1f} rows/s  {mb / gen_s:6.1f} MB/s  peak RSS {gen_rss / 2**30:.2f} GiB\n"
        f"  floor     {floor_s:6.2f} s  (numpy float32 normals -> parquet, same shapes and compression)  peak RSS {floor_rss / 2**30:.2f} GiB\n"
        f"  ratio generator/floor = {gen_s / floor_s:.2f}  (goal <= 2.0); peak RSS goal < 2 GiB: "
        f"{'met' if gen_rss < 2**31 else 'MISSED'}"
    )
    return result
