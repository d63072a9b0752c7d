"""The README's Quick tour on the small preset, run as a user types it (in a fresh folder, so its
relative data/ and results/ paths are the user's): every line exits 0, and a later command that
forgets --data is pointed at the generated set rather than at the paper-size generate.

Two caps keep it fast on 2 shared cores, and neither touches what the tour checks: one split
(`--split test`, not `all`) and, for SmolLM2, one row of 8 new tokens. The SmolLM2 row still has the
small preset's longest series, whose values alone are ~12,000 tokens: the prompt must be fitted to the
model's 8,192-token context (it failed with "does not fit" before the budget followed the context).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # SmolLM2 fills its 8,192-token context once: ~1 min on a quiet CPU

TSBENCH = [sys.executable, "-m", "tsbench.cli"]
DATA = "data/small/seed42"

# The tour's small-preset lines (README "Quick tour"), with the caps named above appended.
TOUR = [
    "generate --preset small --split test --out data/small",
    f"describe {DATA}/test-precise.parquet",
    f"describe {DATA}/test-precise.parquet --plot test-localize-2048-00003 --out row.png",
    f"eval --model scripted/zscore --harness rlm --limit 5 --data {DATA}",
    "show results/scripted_zscore__rlm",
    f"eval --model local/smollm2-135m --harness single-pass-text --limit 2 --data {DATA} --limit 1 --max-tokens 8",
]


def tsbench(line: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TSBENCH, *shlex.split(line)], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    folder = tmp_path_factory.mktemp("tour")
    done = {}
    for line in TOUR:
        done[line] = result = tsbench(line, folder)
        if result.returncode != 0:
            break
    return folder, done


def test_every_small_preset_line_runs_as_written(tour):
    folder, done = tour
    for line in TOUR:
        assert line in done, f"not reached: {line}"
        result = done[line]
        assert result.returncode == 0, f"tsbench {line}\n{result.stderr[-2000:]}"
    assert (folder / "row.png").stat().st_size > 1000
    zscore = pd.read_parquet(folder / "results/scripted_zscore__rlm/samples.parquet")
    assert len(zscore) == 5 and zscore["error_type"].isna().all()  # --limit counts rows in all
    assert zscore["id"].iloc[0] in done["show results/scripted_zscore__rlm"].stdout


def test_smollm2_single_pass_prompt_fits_its_context(tour):
    folder, _ = tour
    row = pd.read_parquet(folder / "results/local_smollm2-135m__single-pass-text/samples.parquet").iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    [call] = json.loads(row["calls"])
    assert 0 < call["input_tokens"] <= 8192 - 8
    user = json.loads(row["transcript"])[1]
    assert user["context_tokens"] == 8192 and user["prompt_tokens"] <= user["prompt_token_room"]


def test_a_command_without_data_points_at_the_generated_set(tour):
    folder, _ = tour
    result = tsbench("eval --model scripted/zscore --harness rlm --limit 1", folder)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--data {DATA}" in result.stderr and "1 GB" not in result.stderr
