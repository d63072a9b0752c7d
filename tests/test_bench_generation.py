"""The generator bench compares like with like: its floor writes as many float32 values, in the same
shapes, as the generator writes (an MCQ copy repeating its source), and its sides report their own
CPU seconds without leaving the garbage collector off."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow.parquet as pq

from tsbench.bench import generation
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split


def _blocks(path) -> list[tuple[int, int]]:
    """(channels, L) of every row's values, in file order."""
    cells = pq.read_table(path, columns=["values"]).column("values").to_pylist()
    return [(len(cell), len(cell[0])) for cell in cells]


def test_the_floor_writes_every_value_the_generator_writes(tmp_path):
    shapes = generation._shapes("small")
    floor = generation.run_floor(shapes, str(tmp_path))
    entry = generate_split(preset("small"), "test", tmp_path / "gen")
    written = sum(c * n for name in entry["files"] for c, n in _blocks(tmp_path / "gen" / "seed42" / name))
    floor_blocks = _blocks(tmp_path / "floor.parquet")
    assert sum(c * n for c, n in floor_blocks) == written == sum(c * n * k for c, n, k in shapes)
    assert sorted(floor_blocks) == sorted(
        b for name in entry["files"] for b in _blocks(tmp_path / "gen" / "seed42" / name)
    )
    assert floor["bytes"] == (tmp_path / "floor.parquet").stat().st_size and floor["drawing_cpu"] > 0
    # an MCQ copy repeats its source's values, as in the generator's coarse file
    table = pq.read_table(tmp_path / "floor.parquet").column("values").to_pylist()
    first_copied = next(i for i, (_, _, k) in enumerate(shapes) if k > 1)
    row = sum(k for _, _, k in shapes[:first_copied])
    assert np.array_equal(np.asarray(table[row]), np.asarray(table[row + 1]))


def test_the_synthesis_side_reports_its_own_cpu_seconds(tmp_path):
    assert generation.run_synthesis("small", str(tmp_path))["synthesis_cpu"] > 0
    assert gc.isenabled()  # paused for the synthesis only
