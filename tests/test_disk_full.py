"""A full disk mid-run: one line and exit 2, run.json whole, and a resume that ends exactly where a
run with room ends. The disk is "full" by RLIMIT_FSIZE in the child (writes past the limit fail
with EFBIG, as ENOSPC would on a full device); no root and no real device needed."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys

import pandas as pd

from tsbench.testing import readiness

TSBENCH = [sys.executable, "-m", "tsbench.cli"]
LIMIT_BYTES = 30_000  # a few journal rows


def _tiny_disk() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed by the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


def _eval(small_data, out, limited: bool) -> subprocess.CompletedProcess:
    args = [
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "single-pass-text",
        "--data",
        str(small_data),
        "--regime",
        "precise",
        "--limit-per-category",
        "2",
        "--concurrency",
        "1",
        "--out",
        str(out),
    ]
    return readiness.run([*TSBENCH, *args], capture_output=True, text=True, preexec_fn=_tiny_disk if limited else None)


def test_disk_full_is_one_line_exit_2_and_resume_is_exact(small_data, tmp_path):
    full = _eval(small_data, tmp_path / "full", limited=True)
    assert full.returncode == 2, full.stderr
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no space left" in errors[0] and "samples.jsonl" in errors[0], full.stderr
    assert "Traceback" not in full.stderr
    info = json.loads((tmp_path / "full" / "run.json").read_text())  # whole, never half-written
    assert info["complete"] is False
    assert not list((tmp_path / "full").glob("*.tmp"))
    journal = (tmp_path / "full" / "samples.jsonl").read_bytes()
    assert journal.endswith(b"\n") and all(json.loads(line) for line in journal.splitlines())  # no torn line

    resumed = _eval(small_data, tmp_path / "full", limited=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "unreadable journal line" not in resumed.stderr
    roomy = _eval(small_data, tmp_path / "roomy", limited=False)
    assert roomy.returncode == 0, roomy.stderr
    lines = (tmp_path / "full" / "samples.jsonl").read_text().splitlines()
    keys = [(json.loads(line)["id"], json.loads(line)["epoch"]) for line in lines]
    assert len(keys) == len(set(keys)) == 10  # each row run once over the two invocations
    a = pd.read_parquet(tmp_path / "full" / "samples.parquet").set_index("id")["score"].sort_index()
    b = pd.read_parquet(tmp_path / "roomy" / "samples.parquet").set_index("id")["score"].sort_index()
    pd.testing.assert_series_equal(a, b)
    assert json.loads((tmp_path / "full" / "run.json").read_text())["complete"] is True


def test_write_json_keeps_the_old_file_when_the_new_one_does_not_fit(tmp_path):
    target = tmp_path / "run.json"
    target.write_text('{"old": true}\n')
    code = (
        "import sys; from tsbench.core.provenance import write_json; "
        f"write_json({str(target)!r}, {{'big': 'x' * {2 * LIMIT_BYTES}}})"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=_tiny_disk)
    assert res.returncode != 0 and "File too large" in res.stderr
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind
