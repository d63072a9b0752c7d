"""context.json, the series as JSON beside series.npz: encoded fast (orjson) yet the same floats json wrote,
NaN and inf kept as json's tokens, channel names and order kept. No kernel needed."""

from __future__ import annotations

import json
import math

import numpy as np

from tsbench.harness.runtime.staging import write_context_json


def test_context_json_reads_back_to_the_same_floats_as_json_wrote(tmp_path):
    rng = np.random.default_rng(3)
    awkward = np.array([0.0, -0.0, 1e-05, 5e-324, 1e16, 1.7976931348623157e308, 0.1, -2.5e-310])
    series = {
        "ch_00": rng.standard_normal(5000).astype(np.float32).astype(np.float64),  # how the sandbox gets float32 rows
        'quote "and" ünïcode': rng.standard_normal(300) * 10.0 ** rng.integers(-300, 300, 300),
        "awkward": awkward,
        "empty": np.zeros(0),
    }
    path = tmp_path / "context.json"
    write_context_json(path, series)
    expected = json.loads(json.dumps({name: values.tolist() for name, values in series.items()}))
    loaded = json.loads(path.read_text())
    assert list(loaded) == list(series)
    assert loaded == expected
    assert [math.copysign(1.0, v) for v in loaded["awkward"][:2]] == [1.0, -1.0]  # -0.0 keeps its sign


def test_a_channel_with_nan_or_inf_keeps_json_tokens(tmp_path):
    series = {"a": np.array([1.0, np.nan, np.inf, -np.inf]), "b": np.array([2.0])}
    path = tmp_path / "context.json"
    write_context_json(path, series)
    text = path.read_text()
    assert "NaN" in text and "Infinity" in text and "null" not in text
    loaded = json.loads(text)
    assert math.isnan(loaded["a"][1]) and loaded["a"][2:] == [math.inf, -math.inf] and loaded["b"] == [2.0]
