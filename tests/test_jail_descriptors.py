"""Issue 37, item 5: no descriptor outlives the run that opened it, and none is waited on with select().

Before: five rlm runs in one process left 6 -> 37 -> 64 -> 91 descriptors open (an asyncio loop per worker
thread, made by jupyter_client's blocking calls and never closed), and with more than 1,024 descriptors open
the jail's launch failed with `filedescriptor out of range in select()`: at concurrency 32, rows became
errors or were lost. Judged from /proc/self/fd of this process, with real runs of a scripted policy."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.runtime import check_jail

pytestmark = pytest.mark.timeout(600)

SRC = Path(__file__).resolve().parents[1] / "src"
HELD = 1100  # descriptors opened before the run: every later one is numbered past select()'s 1,024


def _open_descriptors() -> dict[int, str]:
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed meanwhile
            pass
    return found


def _rlm_run(data: Path, out: Path, **settings) -> pd.DataFrame:
    cfg = build(
        EvalConfig,
        {"model": "scripted/zscore", "harness": "rlm", "data": [str(data)], "out": str(out), **settings},
    )
    return pd.read_parquet(run_eval(cfg) / schema.SAMPLES)


def test_five_rlm_runs_in_one_process_leave_no_descriptor_open(small_data, tmp_path):
    check_jail()
    before = _open_descriptors()
    for index in range(5):
        samples = _rlm_run(small_data, tmp_path / f"run{index}", limit=2, concurrency=2)
        assert len(samples) == 2 and samples["error_type"].isna().all(), samples["error"].tolist()
    after = _open_descriptors()
    assert {fd: target for fd, target in after.items() if fd not in before} == {}
    assert len(after) <= len(before)


def test_an_rlm_run_at_concurrency_32_records_every_row(small_data, tmp_path):
    check_jail()
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(HELD)]
    try:
        samples = _rlm_run(small_data, tmp_path / "run", limit=32, concurrency=32)
    finally:
        for fd in held:
            os.close(fd)
    assert len(samples) == 32 and samples["id"].is_unique
    assert samples["error_type"].isna().all(), samples["error"].dropna().str[:200].tolist()
    assert samples["score"].between(0, 1).all()


def test_no_descriptor_is_waited_on_with_select():
    """select() cannot take a descriptor numbered 1,024 or more: poll or selectors only."""
    pattern = re.compile(r"\bselect\.select\(|\bzmq\.select\(|\bSelectSelector\b")
    offenders = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
