"""Generator throughput against its floor, measured interleaved (generator, floor, floor, generator, ...).

The floor is what no generator can beat: numpy drawing the same values the generator draws, float64
standard normals in the same (channels, L) shapes, stored as float32, written to parquet in the same row groups with the cheapest correct settings for them (no
dictionary, no statistics on the floats: `series_file.writer_options`; the generator's compression).
Goal (issue 26): generator <= 1.3x floor; peak RSS < 2 GiB."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.bench.common import Ratio, interleaved, load_average, measure_in_child, spread
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, plan_split
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, select_sources
from tsbench.tasks.anomalyxl.rows import COMPRESSION, ROW_GROUP_BYTES
from tsbench.tasks.series_file import values_array, writer_options

RATIO_GOAL = 1.3
ROUNDS = 2


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
    with pq.ParquetWriter(path, schema, compression=COMPRESSION, **writer_options(schema)) as writer:
        pending, size = [], 0
        for c, n in _shapes(preset_name):
            block = rng.standard_normal((c, n)).astype(np.float32)  # the generator draws float64, stores float32
            pending.append(block)
            size += block.nbytes
            if size >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_arrays([values_array(pending)], schema=schema))
                pending, size = [], 0
        if pending:
            writer.write_table(pa.Table.from_arrays([values_array(pending)], schema=schema))
    return path.stat().st_size


def main(preset_name: str = "paper", rounds: int = ROUNDS) -> dict:
    rows = len(plan_split(preset(preset_name), "test"))
    values = sum(c * n for c, n in _shapes(preset_name))
    peaks: dict[str, int] = {}
    sizes: dict[str, int] = {}

    def side(name: str, fn):
        def run() -> float:
            with tempfile.TemporaryDirectory() as tmp:
                seconds, peak, size = measure_in_child(fn, preset_name, tmp)
            peaks[name] = max(peaks.get(name, 0), peak)
            sizes[name] = size
            return seconds

        return run

    samples = interleaved({"generator": side("generator", run_generator), "floor": side("floor", run_floor)}, rounds)
    gen, floor = samples["generator"], samples["floor"]
    ratio = Ratio("generator / floor", gen, floor, RATIO_GOAL)
    mb = values * 4 / 2**20
    gen_s = min(gen)
    rss_met = peaks["generator"] < 2**31
    print(
        f"generate ({preset_name} test split, {rows} precise rows + MCQ, {mb:.0f} MB of float32; {load_average()}):\n"
        f"  generator {spread(gen)}  {rows / gen_s:6.1f} rows/s  {mb / gen_s:6.1f} MB/s  "
        f"peak RSS {peaks['generator'] / 2**30:.2f} GiB  file {sizes['generator'] / 2**20:.0f} MiB\n"
        f"  floor     {spread(floor)}  (numpy float64 normals in the same shapes, as float32 -> parquet, no dictionary "
        f"or statistics on floats, same compression)  peak RSS {peaks['floor'] / 2**30:.2f} GiB\n"
        f"  {ratio.line()}\n"
        f"  generator peak RSS goal < 2 GiB: {'met' if rss_met else 'MISSED'}"
    )
    return {
        "rows": rows,
        "values": values,
        "generator_s": gen,
        "floor_s": floor,
        "ratio": ratio.as_dict(),
        "peak_rss_GiB": peaks["generator"] / 2**30,
        "file_MB": sizes["generator"] / 2**20,
    }
