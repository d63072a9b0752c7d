"""Run dirs as they arrive at `tsbench leaderboard` after a crash or a bad copy: each damaged one is
named in one warning line and the rest still build; runs are named by their folder; messages keep
whole dataset keys and name flags as typed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard.load import load_results
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


@pytest.fixture(scope="module")
def run_dir(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "stored-name"
    cfg = dict(model="scripted/zscore", harness="single-pass-text", data=[str(small_data)], regime="coarse")
    return run_eval(build(EvalConfig, cfg | dict(categories=[lb.PRESENCE], limit=2, out=str(out))))


def _copies(run_dir: Path, root: Path) -> dict[str, Path]:
    dirs = {}
    for name in ("good", "bad_results_json", "truncated_parquet", "garbage_journal"):
        dirs[name] = shutil.copytree(run_dir, root / name)
    (dirs["bad_results_json"] / "results.json").write_text('{"results": ')
    (dirs["truncated_parquet"] / "samples.jsonl").unlink()
    parquet = dirs["truncated_parquet"] / "samples.parquet"
    parquet.write_bytes(parquet.read_bytes()[:300])
    with open(dirs["garbage_journal"] / "samples.jsonl", "ab") as fh:
        fh.write(b"garbage {{{ not json\n\x00\x01binary\n")
    return dirs


def test_each_damaged_run_dir_is_one_warning_naming_it(run_dir, tmp_path):
    dirs = _copies(run_dir, tmp_path)
    rows, infos, warnings = load_results(list(dirs.values()))
    for name in ("bad_results_json", "truncated_parquet", "garbage_journal"):
        mine = [w for w in warnings if str(dirs[name]) in w]
        assert len(mine) == 1 and "\n" not in mine[0], (name, warnings)
    assert not any(str(dirs["good"]) + ":" in w or f"skipped {dirs['good']}" in w for w in warnings)
    assert sorted(i.run_name for i in infos) == ["bad_results_json", "garbage_journal", "good"]  # by folder
    assert len(rows) == 2  # the three readable copies merge into one configuration


def test_the_command_warns_and_still_builds(run_dir, tmp_path):
    dirs = _copies(run_dir, tmp_path)
    res = readiness.run(
        [*TSBENCH, "leaderboard", *map(str, dirs.values()), "--out", str(tmp_path / "board")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    for name in ("bad_results_json", "truncated_parquet", "garbage_journal"):
        assert sum(str(dirs[name]) in line for line in warned) == 1, res.stderr
    bad = readiness.run(
        [*TSBENCH, "leaderboard", str(run_dir), "--n-boot", "0", "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--n-boot must be at least 1" in bad.stderr


def test_messages_name_every_provider_and_the_flags():
    from tsbench.models.registry import get_model

    with pytest.raises(ValueError) as error:
        get_model("nope/x")
    assert all(p in str(error.value) for p in ("openai/", "vllm/", "local/", "scripted/", "classical/", "detector/"))
    from tsbench.core.settings import spec_map

    assert "jitter" in spec_map(EvalConfig)["retry_delay_s"].doc
