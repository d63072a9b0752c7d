"""The Python API: generate -> evaluate -> compare -> leaderboard from a notebook, the same functions
the command line calls, one typed error with the command line's one line, and a cheap `import tsbench`."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

import tsbench
from tsbench.core.errors import UserError


def test_import_tsbench_loads_nothing_heavy():
    """`import tsbench` is lazy: no numpy, pandas, typer or tsbench submodule until a name is used."""
    code = (
        "import sys, tsbench; heavy = [m for m in ('numpy', 'pandas', 'typer', 'scipy', 'tsbench.api') "
        "if m in sys.modules]; print(heavy); tsbench.generate; print('tsbench.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True"
    assert {"generate", "evaluate", "compare", "leaderboard", "contamination", "UserError"} <= set(dir(tsbench))


def test_generate_evaluate_compare_leaderboard(small_data, tmp_path):
    data = tsbench.generate("anomalyxl", preset="small", seed=42, out=tmp_path / "data")
    assert [f.read_bytes() for f in data.files] == [f.read_bytes() for f in sorted(small_data.glob("*.parquet"))]
    assert len(data.data_hash()) == 12
    run = tsbench.evaluate("scripted/zscore", data, harness="single-pass-text", out=tmp_path / "a")
    assert isinstance(run.rows, pd.DataFrame) and len(run.rows) == 44 and run.run_dir == tmp_path / "a"
    assert run.summary["overall"]["mean"] == pytest.approx(run.rows["score"].mean())
    assert run.info["model"] == "scripted/zscore" and run.results["complete"] is True
    again = tsbench.evaluate("scripted/zscore", data, harness="single-pass-text", out=tmp_path / "a")  # resumes
    assert again.rows["score"].tolist() == run.rows["score"].tolist()
    other = tsbench.evaluate(
        "scripted/zscore", [str(f) for f in data.files], harness="single-pass-text", out=tmp_path / "b", limit=20
    )
    comparison = tsbench.compare(run, other.run_dir)
    assert comparison.common == 20 and [s.lacks for s in comparison.sides] == [0, 24]
    assert comparison.pairs[0].overall.result.diff == 0.0  # the same policy on the same rows
    board = tsbench.leaderboard([run, other], out=tmp_path / "board", n_boot=50)
    assert (tmp_path / "board" / "leaderboard.md").is_file() and len(board.cells)
    assert tsbench.leaderboard is sys.modules["tsbench.leaderboard"]  # the package answers the call


def test_errors_are_the_command_lines_one_line(small_data, cli, tmp_path):
    with pytest.raises(UserError) as raised:
        tsbench.evaluate("scripted/nope", small_data, out=tmp_path / "x")
    code, _, err = cli("eval", "--model", "scripted/nope", "--data", small_data, "--out", tmp_path / "y")
    assert code == 2 and err.strip() == f"error: {raised.value}"
    with pytest.raises(UserError, match="is not a run directory"):
        tsbench.compare(tmp_path / "x", tmp_path / "missing")
    with pytest.raises(UserError, match="no run directories"):
        tsbench.leaderboard([tmp_path / "empty"], out=tmp_path / "board")
    with pytest.raises(UserError, match="unknown"):
        tsbench.generate("no-such-family", out=tmp_path)
