"""Replay of every offline real series the installed packages ship (statsmodels, aeon): each builds,
passes the audit including the degeneracy checks, and `generate --source replay` writes the set."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from tsbench.tasks.timesage.audit import audit
from tsbench.tasks.timesage.contract import SCHEMA_FILE, TABLE_FILE
from tsbench.tasks.timesage.generate import generate_from_options
from tsbench.tasks.timesage.sources.replay import SPECS, build_replay

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # aeon marks some loaders deprecated

SHIPPED = {
    "statsmodels": {"elnino", "co2", "macrodata", "nile", "sunspots", "danish_data", "interest_inflation"},
    "aeon": {"Airline", "Lynx", "Uschange", "ShampooSales"},
}


@pytest.fixture(scope="module")
def sets():
    return build_replay(24)


def test_every_shipped_series_replays_and_passes_the_audit(sets):
    used = {}
    for spec in SPECS:
        used.setdefault(spec.package, set()).add(spec.dataset)
    assert used == SHIPPED
    report = audit(sets)
    assert report.ok, report.failures[:3]
    assert {s.tier for s, _ in sets} == {"easy", "medium", "hard"}
    for scenario, periods in sets:
        assert scenario.source == "replay" and len(periods) >= 12, scenario.id
        for period in periods:
            table = pd.read_csv(io.BytesIO(period.files[TABLE_FILE]), dtype={"date": str})
            assert table["date"].iloc[-1] == period.label
            assert "x-rule" not in period.files[SCHEMA_FILE].decode()
        if "latest_value" in scenario.required_keys:  # a real reading, as the table shows it
            last = periods[-1]
            table = pd.read_csv(io.BytesIO(last.files[TABLE_FILE]), dtype={"date": str})
            value = scenario.field("latest_value").derive["column"]
            assert last.truth["latest_value"] == pytest.approx(float(table[value].iloc[-1]))
    airline = next(p for s, p in sets if s.id == "replay-transportation-airline-monthly-medium")
    assert airline[-1].label == "1960-12" and airline[-1].truth["change"] == 432 - 390  # Dec 1960 vs Nov 1960


def test_generate_writes_the_replay_set(tmp_path):
    manifest_path, _ = generate_from_options({"source": "replay", "periods": 12, "scenarios": 3}, tmp_path)
    manifest = json.loads(manifest_path.read_text())
    assert manifest["audit"]["ok"] and manifest["config"]["source"] == "replay"
    assert manifest["audit"]["scenarios"] == 3 and manifest["audit"]["instances"] == 36
