"""SmolLM2 under single-pass-text on the small preset's longest series, whose values alone are ~12,000
tokens: the prompt must be fitted to the model's 8,192-token context (it failed with "does not fit"
before the budget followed the context). The README's tour itself is tests/test_readme_tour.py."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from tsbench.testing import readiness

pytestmark = pytest.mark.slow  # SmolLM2 fills its 8,192-token context once: ~1 min on a quiet CPU


def test_smollm2_single_pass_prompt_fits_its_context(small_data, tmp_path):
    ids = pd.read_parquet(small_data / "test-precise.parquet", columns=["id"])["id"]
    longest = max(ids, key=lambda rid: int(rid.split("-")[-2]))  # test-<category>-<length>-<n>
    args = ["eval", "--model", "local/smollm2-135m", "--harness", "single-pass-text", "--data", str(small_data)]
    args += ["--sample-id", longest, "--max-tokens", "8", "--out", str(tmp_path / "run")]
    done = readiness.run([sys.executable, "-m", "tsbench.cli", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    row = pd.read_parquet(tmp_path / "run" / "samples.parquet").iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    [call] = json.loads(row["calls"])
    assert 0 < call["input_tokens"] <= 8192 - 8
    user = json.loads(row["transcript"])[1]
    assert user["context_tokens"] == 8192 and user["prompt_tokens"] <= user["prompt_token_room"]
