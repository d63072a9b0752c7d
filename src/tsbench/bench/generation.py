"""Generator throughput against its floor, measured interleaved (generator, floor, floor, generator, ...).

The floor is what no single-threaded generator can beat: numpy drawing the same values the generator
draws, float64 standard normals in the same (channels, L) shapes, once per distinct series, stored as
float32 and written to parquet as often as the generator writes them (an MCQ row repeats its source's
values), in row groups of the same size, with the cheapest correct settings for them (no dictionary,
no statistics on the floats: `series_file.writer_options`; the generator's compression). The shapes
are planned before its clock starts: planning is the generator's work. The generator writes on
background threads, so CPU seconds (all threads) are printed and compared beside wall seconds.
Goal (issue 26): generator <= 1.3x floor; peak RSS < 2 GiB."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.bench.common import Ratio, interleaved, load_average, measure_in_child_cpu, spread
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, plan_split
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, select_sources
from tsbench.tasks.anomalyxl.rows import COMPRESSION, ROW_GROUP_BYTES
from tsbench.tasks.series_file import values_array, writer_options

RATIO_GOAL = 1.3
ROUNDS = 2


def _shapes(preset_name: str) -> list[tuple[int, int, int]]:
    """(channels, L, times written) of every distinct series, in order: a source row's values are
    written once in the precise file and again for each of its MCQ rows."""
    cfg = preset(preset_name)
    plans = plan_split(cfg, "test")
    sources = select_sources(plans, "test", cfg.seed)
    return [
        (len(p.channel_names), p.length, 1 + (len(TEMPLATES_BY_SOURCE[p.category]) if p.id in sources else 0))
        for p in plans
    ]


def run_generator(preset_name: str, out: str) -> int:
    entry = generate_split(preset(preset_name), "test", out)
    return sum(f["bytes"] for f in entry["files"].values())


def run_floor(shapes: list[tuple[int, int, int]], out: str) -> int:
    """Draw each distinct series once (a generator need not draw an MCQ copy again) and write it as
    often as the generator does, in row groups of the same size, on one thread. The shapes come
    from the caller: planning is the generator's work, not the floor's."""
    rng = np.random.default_rng(0)
    schema = pa.schema([("values", pa.list_(pa.list_(pa.float32())))])
    path = Path(out) / "floor.parquet"
    with pq.ParquetWriter(path, schema, compression=COMPRESSION, **writer_options(schema)) as writer:
        pending, size = [], 0
        for c, n, copies in shapes:
            block = rng.standard_normal((c, n)).astype(np.float32)  # the generator draws float64, stores float32
            for _ in range(copies):
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
    shapes = _shapes(preset_name)
    values = sum(c * n * copies for c, n, copies in shapes)
    peaks: dict[str, int] = {}
    sizes: dict[str, int] = {}
    cpu: dict[str, list[float]] = {"generator": [], "floor": []}

    def side(name: str, fn, arg):
        def run() -> float:
            with tempfile.TemporaryDirectory() as tmp:
                seconds, peak, size, cpu_s = measure_in_child_cpu(fn, arg, tmp)
            peaks[name] = max(peaks.get(name, 0), peak)
            sizes[name] = size
            cpu[name].append(cpu_s)
            return seconds

        return run

    samples = interleaved(
        {"generator": side("generator", run_generator, preset_name), "floor": side("floor", run_floor, shapes)}, rounds
    )
    gen, floor = samples["generator"], samples["floor"]
    ratio = Ratio("generator / floor", gen, floor, RATIO_GOAL)
    # The generator writes on background threads and the floor on one: CPU seconds (all threads) show
    # the work done apart from what a second core hides.
    cpu_ratio = Ratio("generator / floor in CPU seconds", cpu["generator"], cpu["floor"], RATIO_GOAL)
    mb = values * 4 / 2**20
    gen_s = min(gen)
    rss_met = peaks["generator"] < 2**31
    print(
        f"generate ({preset_name} test split, {rows} precise rows + MCQ, {mb:.0f} MB of float32; {load_average()}):\n"
        f"  generator {spread(gen)}  CPU {spread(cpu['generator'])}  {rows / gen_s:6.1f} rows/s  {mb / gen_s:6.1f} MB/s  "
        f"peak RSS {peaks['generator'] / 2**30:.2f} GiB  file {sizes['generator'] / 2**20:.0f} MiB\n"
        f"  floor     {spread(floor)}  CPU {spread(cpu['floor'])}  (numpy float64 normals for each distinct series, "
        f"as float32 -> parquet as often as the generator writes them, no dictionary or statistics on floats, same "
        f"compression, one thread)  peak RSS {peaks['floor'] / 2**30:.2f} GiB\n"
        f"  {ratio.line()}\n"
        f"  {cpu_ratio.line()}\n"
        f"  generator peak RSS goal < 2 GiB: {'met' if rss_met else 'MISSED'}"
    )
    return {
        "rows": rows,
        "values": values,
        "generator_s": gen,
        "floor_s": floor,
        "ratio": ratio.as_dict(),
        "generator_cpu_s": cpu["generator"],
        "floor_cpu_s": cpu["floor"],
        "cpu_ratio": cpu_ratio.as_dict(),
        "peak_rss_GiB": peaks["generator"] / 2**30,
        "file_MB": sizes["generator"] / 2**20,
    }
