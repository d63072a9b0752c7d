"""Generator throughput against its floor, measured interleaved (generator, floor, synthesis, ...).

The floor is what no single-threaded generator can beat: numpy drawing the same values the generator
draws, float64 standard normals in the same (channels, L) shapes, once per distinct series, stored as
float32 and written to parquet as often as the generator writes them (an MCQ row repeats its source's
values), in row groups of the same size, with the cheapest correct settings for them (no dictionary,
no statistics on the floats: `series_file.writer_options`; the generator's compression; reused
buffers, no fresh memory; no cyclic GC). The shapes are planned before its clock starts: planning is
the generator's work. Goal (issue 26): generator <= 1.3x floor in wall seconds; peak RSS < 2 GiB.

The generator synthesises on a small thread pool and writes on background threads, so its CPU
seconds (all threads) are printed too, for information. Its values are more than the draws (waves,
trends, AR(1) and random-walk filters, z-normalisation), which the floor by definition leaves out:
the bench also times that synthesis alone, on one thread without parquet, and prints the generator's
CPU against the floor plus the synthesis beyond drawing (what its threads, hashing, planning and
light columns add)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.bench.common import Ratio, interleaved, load_average, measure_in_child_cpu, spread, verdict
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import cyclic_gc_paused, generate_split, plan_split
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, select_sources
from tsbench.tasks.anomalyxl.rowplan import materialize
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


def run_generator(preset_name: str, out: str) -> dict:
    entry = generate_split(preset(preset_name), "test", out)
    return {"bytes": sum(f["bytes"] for f in entry["files"].values())}


def run_synthesis(preset_name: str, out: str) -> dict:
    """The generator's values for every row, built on one thread into one reused buffer and not
    written: CPU seconds of synthesis alone, planning excluded (`out` is unused)."""
    plans = plan_split(preset(preset_name), "test")
    buffer = np.empty(max(len(p.channel_names) * p.length for p in plans), dtype=np.float32)
    with cyclic_gc_paused():  # as in the generator
        started = time.process_time()
        for p in plans:
            materialize(p.plan, buffer[: len(p.channel_names) * p.length].reshape(len(p.channel_names), p.length))
        return {"synthesis_cpu": time.process_time() - started}


def _floor_options(schema: pa.Schema) -> dict:
    """The generator's parquet settings, with pyarrow's default allocator: on one thread, writing
    group after group with no pause, it frees nothing to the OS between groups and measured a little
    cheaper than the retaining pool the generator's waiting writer threads need."""
    return {**writer_options(schema), "memory_pool": pa.default_memory_pool()}


def run_floor(shapes: list[tuple[int, int, int]], out: str) -> dict:
    """Draw each distinct series once (a generator need not draw an MCQ copy again) and write it as
    often as the generator does, in row groups of the same size, on one thread. The shapes come
    from the caller: planning is the generator's work, not the floor's. Like the generator, it draws
    into one reused float64 scratch per length and stores float32 into one reused row-group buffer,
    so neither pays for fresh memory (a page fault and a zeroed page per 4 KiB). Returns the file's
    size and the CPU seconds spent drawing."""
    rng = np.random.default_rng(0)
    schema = pa.schema([("values", pa.list_(pa.list_(pa.float32())))])
    path = Path(out) / "floor.parquet"
    capacity = max(2 * ROW_GROUP_BYTES // 4, 2 * max(c * n for c, n, _ in shapes))
    # two buffers, one group each in turn: a source's values stay put while its copies go to the next
    buffers = [np.empty(capacity, dtype=np.float32) for _ in range(2)]
    scratch: dict[int, np.ndarray] = {}
    drawing = 0.0
    with (
        cyclic_gc_paused(),  # as in the generator
        pq.ParquetWriter(path, schema, compression=COMPRESSION, **_floor_options(schema)) as writer,
    ):
        pending: list[np.ndarray] = []
        state = {"buffer": 0, "used": 0}

        def write_group() -> None:
            writer.write_table(pa.Table.from_arrays([values_array(pending)], schema=schema))
            pending.clear()
            state["buffer"], state["used"] = 1 - state["buffer"], 0

        def place(c: int, n: int) -> np.ndarray:
            if state["used"] + c * n > capacity:
                write_group()
            used = state["used"]
            state["used"] += c * n
            return buffers[state["buffer"]][used : used + c * n].reshape(c, n)

        def append(block: np.ndarray) -> None:
            pending.append(block)
            if state["used"] * 4 >= ROW_GROUP_BYTES:
                write_group()

        for c, n, copies in shapes:
            drawn = scratch.setdefault(n, np.empty(n))
            source = place(c, n)
            started = time.process_time()
            for channel in source:  # the generator draws float64 normals and stores float32
                channel[...] = rng.standard_normal(out=drawn)
            drawing += time.process_time() - started
            append(source)
            for _ in range(copies - 1):  # an MCQ row stores its source's values again
                block = place(c, n)
                block[...] = source
                append(block)
        if pending:
            write_group()
    return {"bytes": path.stat().st_size, "drawing_cpu": drawing}


def main(preset_name: str = "paper", rounds: int = ROUNDS) -> dict:
    rows = len(plan_split(preset(preset_name), "test"))
    shapes = _shapes(preset_name)
    values = sum(c * n * copies for c, n, copies in shapes)
    peaks: dict[str, int] = {}
    results: dict[str, list[dict]] = {"generator": [], "floor": [], "synthesis": []}
    cpu: dict[str, list[float]] = {name: [] for name in results}

    def side(name: str, fn, arg):
        def run() -> float:
            with tempfile.TemporaryDirectory() as tmp:
                seconds, peak, result, cpu_s = measure_in_child_cpu(fn, arg, tmp)
            peaks[name] = max(peaks.get(name, 0), peak)
            results[name].append(result)
            cpu[name].append(cpu_s)
            return seconds

        return run

    samples = interleaved(
        {
            "generator": side("generator", run_generator, preset_name),
            "floor": side("floor", run_floor, shapes),
            "synthesis": side("synthesis", run_synthesis, preset_name),
        },
        rounds,
    )
    gen, floor = samples["generator"], samples["floor"]
    ratio = Ratio("generator / floor", gen, floor, RATIO_GOAL)
    # What any generator of these series spends at least: the floor (draw + write) plus the synthesis
    # beyond drawing, per round.
    drawing = [r["drawing_cpu"] for r in results["floor"]]
    beyond = [r["synthesis_cpu"] - d for r, d in zip(results["synthesis"], drawing)]
    bound = [f + b for f, b in zip(cpu["floor"], beyond)]
    cpu_ratio = statistics.median(cpu["generator"]) / statistics.median(cpu["floor"])
    bound_ratio = statistics.median(bound) / statistics.median(cpu["floor"])
    to_bound = statistics.median(cpu["generator"]) / statistics.median(bound)
    mb = values * 4 / 2**20
    gen_s = min(gen)
    rss_met = peaks["generator"] < 2**31
    file_mb = results["generator"][-1]["bytes"] / 2**20
    print(
        f"generate ({preset_name} test split, {rows} precise rows + MCQ, {mb:.0f} MB of float32; {load_average()}):\n"
        f"  generator {spread(gen)}  CPU {spread(cpu['generator'])}  {rows / gen_s:6.1f} rows/s  {mb / gen_s:6.1f} MB/s  "
        f"peak RSS {peaks['generator'] / 2**30:.2f} GiB  file {file_mb:.0f} MiB\n"
        f"  floor     {spread(floor)}  CPU {spread(cpu['floor'])}, of it drawing {spread(drawing)}  (numpy float64 "
        f"normals for each distinct series, as float32 -> parquet as often as the generator writes them, no dictionary "
        f"or statistics on floats, same compression, reused buffers, one thread)  peak RSS {peaks['floor'] / 2**30:.2f} GiB\n"
        f"  synthesis alone (every row's values on one thread, no parquet): CPU "
        f"{spread([r['synthesis_cpu'] for r in results['synthesis']])}; beyond drawing {spread(beyond)}\n"
        f"  {ratio.line()}\n"
        f"  CPU seconds (information, no goal; medians): generator / floor {cpu_ratio:.2f}. The floor synthesises "
        f"nothing: floor + synthesis beyond drawing = {bound_ratio:.2f}x the floor, and the generator is "
        f"{to_bound:.2f}x that (its threads, sha256, planning and light columns)\n"
        f"  generator peak RSS goal < 2 GiB: {verdict(rss_met)}"
    )
    return {
        "rows": rows,
        "values": values,
        "generator_s": gen,
        "floor_s": floor,
        "ratio": ratio.as_dict(),
        "generator_cpu_s": cpu["generator"],
        "floor_cpu_s": cpu["floor"],
        "floor_drawing_cpu_s": drawing,
        "synthesis_beyond_drawing_cpu_s": beyond,
        "cpu_ratio_median": cpu_ratio,
        "floor_plus_synthesis_ratio_median": bound_ratio,
        "cpu_to_floor_plus_synthesis_median": to_bound,
        "peak_rss_GiB": peaks["generator"] / 2**30,
        "file_MB": file_mb,
    }
