"""The contamination probe flags a policy that memorised seed 42's answers and clears one that did not."""

from __future__ import annotations

import json
import re

import pytest

from tsbench.baselines import POLICIES
from tsbench.contamination import fresh_options, paired_by_cell, probe, same_design
from tsbench.core.data_hash import manifest_split_hash
from tsbench.core.errors import UserError
from tsbench.core.registry import _target


@pytest.fixture
def memorised_policy(monkeypatch):
    """`memorised/<seed dir>` registered for this test only (tsbench never registers it)."""
    monkeypatch.setitem(POLICIES.builtins, "memorised", _target("tsbench.testing.memorised:build"))


def test_probe_flags_a_policy_that_memorised_the_published_split(small_data, memorised_policy, tmp_path):
    report = probe(f"memorised/{small_data}", small_data, harness="direct", out=tmp_path, n_boot=200)
    published, fresh = (
        report.comparison.pairs[0].overall.result.mean_a,
        report.comparison.pairs[0].overall.result.mean_b,
    )
    assert published == 1.0 and fresh == 0.0  # it knows every published answer and nothing else
    assert report.flagged and report.verdict.startswith("published split scores higher by +1.000")
    # the fresh split is the same design with another seed: same config but the seed, same cells
    manifest = json.loads((small_data / "manifest.json").read_text())
    fresh_manifest = json.loads(next(tmp_path.glob("data/seed*/manifest.json")).read_text())
    assert fresh_manifest["seed"] != manifest["seed"] and same_design(manifest, fresh_manifest, "test") is None
    assert report.published_hash == manifest_split_hash(manifest, "test") != report.fresh_hash
    assert report.comparison.common == sum(f["rows"] for f in manifest["splits"]["test"]["files"].values())
    saved = json.loads((tmp_path / "contamination.json").read_text())
    assert saved["flagged"] is True and saved["published"]["sha"] == report.published_hash


def test_probe_clears_the_scripted_policy_from_the_command_line(small_data, cli, tmp_path):
    code, out, err = cli(
        "contamination", "--model", "scripted/zscore", "--harness", "single-pass-text", "--data", small_data,
        "--out", tmp_path, "--n-boot", "200",
    )  # fmt: skip
    assert code == 0, err
    manifest = json.loads((small_data / "manifest.json").read_text())
    assert f"(sha {manifest_split_hash(manifest, 'test')})" in out.splitlines()[0]
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith("verdict: no evidence of memorisation at this n (gap ")
    assert re.search(r"^  localize: published \d\.\d{3}, fresh \d\.\d{3}, gap [+-]\d\.\d{3} ", out, re.M)
    assert json.loads((tmp_path / "contamination.json").read_text())["flagged"] is False


def test_rows_pair_by_cell():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "id": [
                "test-localize-2048-00000",
                "test-localize-1024-00001",
                "test-localize-1024-00000",
                "mcq-b",
                "mcq-a",
            ],
            "epoch": 0,
            "category": ["localize", "localize", "localize", "presence", "presence"],
            "length": [2048, 1024, 1024, 2048, 1024],
        }
    )
    assert paired_by_cell(rows)["id"].tolist() == [
        "localize#00000",
        "localize#00001",
        "localize#00002",
        "presence#00000",
        "presence#00001",
    ]


def test_fresh_options_and_bad_input(small_data, cli, tmp_path):
    manifest = json.loads((small_data / "manifest.json").read_text())
    options = fresh_options(manifest, "test", 7)
    assert options["seed"] == 7 and options["preset"] == "small" and options["rows_per_cell"] == 4
    with pytest.raises(UserError, match="no generator config for split 'val'"):
        fresh_options(manifest, "val", 7)
    code, _, err = cli("contamination", "--model", "scripted/zscore", "--data", tmp_path, "--out", tmp_path / "o")
    assert code == 2 and "no manifest.json" in err and err.count("\n") == 1
    code, _, err = cli("contamination", "--model", "scripted/zscore", "--data", small_data, "--fresh-seed", "42")
    assert code == 2 and "must differ" in err
