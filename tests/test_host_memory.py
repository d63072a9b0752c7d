"""The eval host holds the rows in flight, not the rows played (issue 47): an rlm episode's sandbox,
its series and its task are freed when the episode ends (no cycle left for a full gc to find), and
buffers freed by reading rows go back to the OS."""

from __future__ import annotations

import gc
import json
import os
import sys

import pytest

from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.runtime import SandboxError, check_jail
from tsbench.testing import readiness


def _live(kind: type) -> list:
    return [obj for obj in gc.get_objects() if isinstance(obj, kind)]


def test_an_rlm_eval_holds_only_the_episodes_in_flight(small_data, tmp_path):
    """With the cycle collector off, the tasks and the series alive never outnumber the episodes in
    flight, and no sandbox or task is left when the run ends: memory follows the rows in flight, not
    the rows run (a box and its start referred to each other: each row's float64 series waited for a
    full gc, 85 MiB of a 32-row c8 run of the paper's split)."""
    try:
        check_jail()
    except SandboxError as exc:  # pragma: no cover - hosts without bubblewrap
        pytest.skip(f"no jail here: {exc}")
    from tsbench.core.episode import EpisodeTask
    from tsbench.harness.runtime.sandbox import Sandbox
    from tsbench.harness.runtime.staging import matplotlib_font_lists

    concurrency, rows = 2, 6
    seen: list[tuple[int, int, int]] = []

    before: set[int] = set()  # what earlier tests in this process still hold is not this run's

    def ours(kind: type) -> list:
        return [obj for obj in _live(kind) if id(obj) not in before]

    def on_update(progress) -> None:
        boxes = ours(Sandbox)
        seen.append((len(boxes), len(ours(EpisodeTask)), sum(bool(box.series) for box in boxes)))

    cfg = EvalConfig(
        model="scripted/zscore",
        harness="rlm",
        data=[str(small_data)],
        limit=rows,
        concurrency=concurrency,
        out=str(tmp_path / "run"),
    )
    matplotlib_font_lists()  # once per process, and its glob leaves a cycle holding the calling frames
    was_enabled = gc.isenabled()
    gc.collect()
    before.update(id(obj) for kind in (Sandbox, EpisodeTask) for obj in _live(kind))
    gc.disable()
    try:
        out = run_eval(cfg, on_update=on_update)
        left = (len(ours(Sandbox)), len(ours(EpisodeTask)))
    finally:
        if was_enabled:
            gc.enable()
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line.strip()]
    assert len(records) == rows and all(r["error_type"] is None for r in records), records
    assert len(seen) == rows + 1  # once before the first row, then once per record
    # in flight: one task per worker, plus at most the one whose record is being handed over while its
    # worker already took the next row (a race a loaded machine wins); a leak would hold all `rows`
    held = concurrency + 1
    assert max(tasks for _, tasks, _ in seen) <= held < rows, seen
    assert max(with_series for _, _, with_series in seen) <= held, seen
    assert left == (0, 0), left


_POOL = (
    "import pyarrow as pa; from tsbench.eval.host_memory import release_freed_memory as r; t = r(); "
    "print(pa.default_memory_pool().backend_name, t['arrow_system_pool'], t == r())"
)


@pytest.mark.parametrize("user_pool", [None, "jemalloc"])
def test_the_host_reads_rows_on_the_system_allocator_unless_the_user_chose_one(user_pool):
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if user_pool:
        env["ARROW_DEFAULT_MEMORY_POOL"] = user_pool
    out = readiness.run([sys.executable, "-c", _POOL], env=env, text=True)
    assert out.returncode == 0, out.stderr
    if user_pool is None:
        assert out.stdout.split() == ["system", "True", "True"]
    else:  # the user's pool stays (whatever this pyarrow build makes of the name)
        assert out.stdout.split()[1:] == ["False", "True"], out.stdout


def test_a_float32_series_is_widened_one_channel_at_a_time_to_the_same_npz():
    """The sandbox keeps a float32 channel as given (no float64 copy of the row held for the episode);
    series.npz holds what np.savez of the float64 channels held."""
    import io

    import numpy as np

    from tsbench.harness.runtime.staging import as_channel, series_npz

    values = np.random.default_rng(0).standard_normal((3, 1000)).astype(np.float32)
    values[1, 5] = np.nan
    kept = {name: as_channel(name, row) for name, row in zip("abc", values)}
    assert all(np.shares_memory(kept[name], row) for name, row in zip("abc", values))
    expected = io.BytesIO()
    np.savez(expected, names=np.array(list("abc")), **{f"c{i}": row.astype(np.float64) for i, row in enumerate(values)})
    old, new = np.load(io.BytesIO(expected.getvalue())), np.load(io.BytesIO(bytes(series_npz(kept))))
    assert list(old.keys()) == list(new.keys()) == ["names", "c0", "c1", "c2"]
    for key in old.keys():
        assert old[key].dtype == new[key].dtype and np.array_equal(old[key], new[key], equal_nan=key != "names")
    with pytest.raises(ValueError, match="one-dimensional"):
        as_channel("a", values)
