"""TimeClaw episodic memory: the fingerprint psi, the bank, two-stage retrieval, building, injection."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.baselines import build_policy
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask, HarnessSettings, MemorySettings, get_harness, play
from tsbench.tasks.anomalyxl.rows import iter_rows
from tsbench.testing import readiness
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.timeclaw import DIM, FEATURE_NAMES, MemoryBank, build_memory, fingerprint, fingerprint_dict, load_bank
from tsbench.timeclaw.bank import MEMORY_HEADER, bank_scaler, render_precedents
from tsbench.timeclaw.embed import OpenAIEmbedder, context_descriptor, get_embedder
from tsbench.timeclaw.memory_wrapper import Remembering

F = {name: index for index, name in enumerate(FEATURE_NAMES)}


@pytest.fixture(scope="module", autouse=True)
def _no_background_stumpy_compile():
    """Episodes here never call discords: keep the tools harness from compiling stumpy in the background."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSBENCH_STUMPY_WARMUP", "0")
        yield


# -- the fingerprint ---------------------------------------------------------------------------------


def test_feature_order_is_the_papers():
    assert DIM == 20
    assert FEATURE_NAMES[:6] == ("logLen", "logChan", "miss", "irreg", "meanZ", "stdLog")
    assert FEATURE_NAMES[14:17] == ("fft_freq", "fft_pfrac", "spec_entropy")
    assert FEATURE_NAMES[18:] == ("mean_abs_corr", "outlier_rate")


def test_pure_sine_dominant_frequency_and_power_fraction():
    n, k = 1000, 50  # exactly 50 cycles: the energy sits in one rFFT bin
    x = np.sin(2 * np.pi * k * np.arange(n) / n)
    psi = fingerprint_dict([x])
    assert psi["fft_freq"] == pytest.approx(k / n)
    assert psi["fft_pfrac"] > 0.999
    assert psi["spec_entropy"] < 0.01
    assert psi["acf_1"] == pytest.approx(math.cos(2 * math.pi * k / n), abs=2e-3)
    assert psi["logLen"] == pytest.approx(math.log10(n + 1))
    assert psi["logChan"] == pytest.approx(1.0)
    assert psi["stdLog"] == pytest.approx(math.log10(np.std(x, ddof=1) + 1))
    assert psi["iqr_over_std"] == pytest.approx((np.quantile(x, 0.75) - np.quantile(x, 0.25)) / np.std(x, ddof=1))
    assert psi["kurt"] == pytest.approx(-1.5, abs=0.01)  # a sine's excess kurtosis
    assert psi["miss"] == psi["irreg"] == psi["meanZ"] == psi["mean_abs_corr"] == 0.0
    assert psi["r2"] < 0.01


def test_white_noise_has_near_zero_autocorrelation():
    x = np.random.default_rng(0).standard_normal(20_000)
    psi = fingerprint_dict(x)
    for key in ("acf_1", "acf_sqrt", "acf_quarter", "skew", "kurt", "slope"):
        assert abs(psi[key]) < 0.05, key
    assert psi["spec_entropy"] > 0.9 and psi["fft_pfrac"] < 0.01
    assert psi["outlier_rate"] == pytest.approx(0.043, abs=0.01)  # P(|z| > 3 * 0.6745)


def test_constant_channel_follows_the_degenerate_rules():
    constant = np.full(100, 0.1)  # 0.1 is not exact in binary: the mean carries round-off
    psi = fingerprint_dict([constant])
    assert psi["logLen"] == pytest.approx(math.log10(101)) and psi["logChan"] == pytest.approx(1.0)
    per_channel = [k for k in FEATURE_NAMES if k not in ("logLen", "logChan")]
    assert all(psi[k] == 0.0 for k in per_channel), {k: psi[k] for k in per_channel if psi[k]}
    sine = np.sin(np.arange(256) / 5.0)
    alone, mixed = fingerprint_dict([sine]), fingerprint_dict([sine, np.full(256, 3.0)])
    for key in ("acf_1", "skew", "fft_freq", "spec_entropy", "outlier_rate", "cp_rate"):
        assert mixed[key] == pytest.approx(alone[key] / 2)  # the constant channel counts, with 0
    assert mixed["mean_abs_corr"] == 0.0  # one non-constant channel: no pair
    assert mixed["stdLog"] == pytest.approx(math.log10(np.std(sine, ddof=1) / 2 + 1))


def test_short_missing_and_empty_channels():
    short = fingerprint_dict([np.array([1.0, 2.0])])  # n < 3: every per-channel feature is 0
    assert short["iqr_over_std"] == short["acf_1"] == short["stdLog"] == 0.0
    seven = fingerprint_dict([np.arange(7.0) ** 2])  # 3 <= n < 8: spectral features are 0
    assert seven["fft_freq"] == seven["fft_pfrac"] == seven["spec_entropy"] == 0.0 and seven["r2"] > 0.9
    x = np.random.default_rng(1).standard_normal((3, 100))
    x[0, :10] = np.nan
    x[2, :] = np.nan  # an all-missing channel is dropped
    psi = fingerprint_dict(x)
    assert psi["miss"] == pytest.approx(110 / 300)
    assert psi["logChan"] == pytest.approx(math.log2(3))
    assert psi["logLen"] == pytest.approx(math.log10(95 + 1))  # median of (90, 100)
    assert fingerprint_dict(x, lengths=[100, 100, 0])["miss"] == pytest.approx(10 / 200)  # the third: padding
    assert not np.any(fingerprint(np.full((2, 5), np.nan)))  # nothing finite: all zeros (the authors' code)
    empty = fingerprint(np.full((2, 5), np.nan), variant="paper")  # the paper: every entry is missing
    assert empty[F["miss"]] == 1.0 and np.count_nonzero(empty) == 1
    assert np.all(np.isfinite(fingerprint(np.array([[np.inf, 1.0, 1.0, 1.0]]))))


def test_irregular_timestamps_flag():
    x = np.random.default_rng(2).standard_normal(50)
    assert fingerprint_dict(x, timestamps=np.arange(50.0))["irreg"] == 0.0
    assert fingerprint_dict(x, timestamps=np.cumsum(np.random.default_rng(3).uniform(0.5, 1.5, 50)))["irreg"] == 1.0


def test_permuting_channels_leaves_psi_unchanged():
    rng = np.random.default_rng(4)
    t = np.arange(500)
    x = np.stack(
        [
            np.sin(t / 7) + 0.1 * rng.standard_normal(500),
            rng.standard_normal(500).cumsum(),
            np.where(t > 250, 3.0, 0.0) + rng.standard_normal(500),
            np.full(500, 2.0),
        ]
    )
    base = fingerprint(x)
    for perm in ([3, 2, 1, 0], [1, 3, 0, 2]):
        np.testing.assert_allclose(fingerprint(x[perm]), base, rtol=1e-12, atol=1e-12)
    names = ["a", "b", "c", "d"]
    np.testing.assert_allclose(fingerprint(dict(zip(names, x))), base)
    assert base[F["mean_abs_corr"]] > 0  # three non-constant channels: pairs exist


# -- the bank and two-stage retrieval ---------------------------------------------------------------


def _record(rid, family, f0, phi, f1=0.0):
    psi = [0.0] * DIM
    psi[0], psi[1] = f0, f1
    return {
        "id": rid,
        "source_id": rid,
        "family": family,
        "regime": "precise",
        "length": 100,
        "n_channels": 1,
        "descriptor": rid,
        "psi": psi,
        "phi": phi,
        "embedder": "test" if phi is not None else "none",
        "trajectory": "[]",
        "rationale": f"rationale {rid}",
        "summary": f"summary of {rid}",
        "score": 1.0,
        "model": "m",
        "harness": "tools",
        "run": "r",
        "created_at": "",
    }


@pytest.fixture
def small_bank(tmp_path):
    s = math.sqrt(1 - 0.9**2)
    records = [
        _record("A", "localize", 0.0, [1.0, 0.0, 0.0]),
        _record("B", "presence", 3.0, [0.9, s, 0.0]),
        _record("C", "localize", 1.0, [0.0, 1.0, 0.0]),
        _record("D", "presence", 0.1, [0.0, 0.0, 1.0]),
        _record("E", "localize", 0.0, None),  # no embedding: skipped by the text stage
    ]
    path = MemoryBank(records).save(tmp_path / "bank.parquet")
    return load_bank(path)


def _query(f0):
    psi = np.zeros(DIM)
    psi[0] = f0
    return psi


def test_bank_z_scoring_uses_its_own_statistics_with_a_std_floor(small_bank):
    f0 = np.array([0.0, 3.0, 1.0, 0.1, 0.0])
    assert small_bank.mean[0] == pytest.approx(f0.mean()) and small_bank.std[0] == pytest.approx(f0.std())
    assert np.all(small_bank.std[1:] == 1.0)  # constant in the bank: excluded from the metric
    normalised = small_bank.normalise(_query(0.9))
    assert normalised[0] == pytest.approx((0.9 - f0.mean()) / f0.std()) and np.all(normalised[1:] == 0.0)
    psi = np.zeros((3, DIM))
    psi[:, 2] = [1.0, 1.0 + 1e-12, 1.0]  # spread below the 1e-9 floor
    assert bank_scaler(psi)[1][2] == 1.0


def test_retrieval_order_by_hand(small_bank):
    query = np.array([1.0, 0.0, 0.0])
    # Stage 1, pool 3 by cosine: A (1), B (0.9), then C and D tie at 0 -> C (bank order); E has no phi.
    # Stage 2 by |f0 - 0.9| (the only varying feature): C 0.1 < A 0.9 < B 2.1.
    found = small_bank.retrieve(_query(0.9), query, top_k=2, pool=3)
    assert [p.id for p in found] == ["C", "A"]
    assert found[0].cosine == pytest.approx(0.0) and found[1].cosine == pytest.approx(1.0)
    assert found[0].distance < found[1].distance
    assert [p.id for p in small_bank.retrieve(_query(0.9), query, top_k=3, pool=2)] == ["A", "B"]
    # No query embedding: the text stage is skipped, every record (E too) is ranked on psi.
    assert [p.id for p in small_bank.retrieve(_query(0.9), None, top_k=3)] == ["C", "D", "A"]
    # Family filter and self-exclusion (by id, and by an identical fingerprint: the same series).
    assert [p.id for p in small_bank.retrieve(_query(0.9), query, top_k=3, family="presence")] == ["D", "B"]
    # Without C the pool of 3 is A, B, D (D moves up from the tie); D (0.8) then beats A (0.9).
    assert [p.id for p in small_bank.retrieve(_query(0.9), query, top_k=2, pool=3, exclude_id="C")] == ["D", "A"]
    assert "C" not in [p.id for p in small_bank.retrieve(_query(1.0), None, top_k=5, exclude_psi=_query(1.0))]
    assert small_bank.retrieve(_query(0.9), query, top_k=0) == []
    with pytest.raises(ValueError, match="dims"):
        small_bank.retrieve(_query(0.9), np.ones(4))


def test_bank_round_trip_and_rendering(small_bank, tmp_path):
    again = MemoryBank.load(small_bank.save(tmp_path / "copy.parquet"))
    assert len(again) == 5 and again.records["id"].tolist() == list("ABCDE")
    assert again.has_phi.tolist() == [True, True, True, True, False] and again.phi_dim == 3
    text = render_precedents(again.retrieve(_query(0.9), None, top_k=2))
    assert text.startswith(MEMORY_HEADER) and "[1] summary of C" in text and "[2] summary of D" in text


# -- context embeddings -----------------------------------------------------------------------------


def test_minilm_embedder_runs_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    encoder = get_embedder("minilm")
    vectors = encoder.embed(
        ["Find the anomaly window in channel ch_00", "Locate the anomalous window of ch_00", "A recipe for lemon cake"]
    )
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    descriptor = context_descriptor("presence", "coarse", ["a", "b"], "Is there an anomaly?", ["Yes", "No"])
    assert descriptor.splitlines() == [
        "task: presence",
        "regime: coarse",
        "channels: a, b",
        "Is there an anomaly?",
        "options: Yes; No",
    ]
    assert len(context_descriptor("x", "y", [], "q" * 10_000)) == 8000


def test_openai_embedder_against_the_loopback_server():
    with FakeOpenAIServer() as server:
        encoder = OpenAIEmbedder("text-embedding-3-small", base_url=server.base_url, api_key="test")
        vectors = encoder.embed(["level shift in ch_00", "level shift in ch_01", "lemon cake"])
        assert server.embedding_bodies[0]["model"] == "text-embedding-3-small"
        assert server.request_count == 0  # the chat script is untouched
    assert vectors.shape == (3, 32) and encoder.name == "openai/text-embedding-3-small"
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


# -- building a bank from a run, and injecting precedents -------------------------------------------


@pytest.fixture(scope="module")
def tools_run(small_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("memory") / "run"
    cfg = build(
        EvalConfig,
        dict(
            model="scripted/tools",
            harness="tools",
            data=[str(small_data)],
            limit_per_category=1,
            concurrency=2,
            out=str(out),
        ),
    )
    return run_eval(cfg)


def test_build_memory_from_a_run(tools_run, tmp_path):
    samples = pd.read_parquet(tools_run / schema.SAMPLES)
    assert 0 < (samples["score"] >= 0.5).sum() < len(samples) and samples["error_type"].isna().all()
    # the authors' admission: every finished episode, whatever it scored
    path = build_memory(tools_run, out=tmp_path / "banks" / "b.parquet", include_test_split=True)
    bank = load_bank(path)
    assert sorted(bank.records["id"]) == sorted(samples["id"])
    assert bank.embedder == "minilm" and bank.phi_dim == 384 and bank.has_phi.all()
    assert bank.fingerprint_variant == "timeclaw" and set(bank.records["fingerprint"]) == {"timeclaw"}
    finals = dict(zip(samples["id"], samples["final_message"]))
    for record in bank.records.to_dict("records"):
        assert len(record["psi"]) == DIM
        row = next(
            iter_rows(
                json.loads((tools_run / "run.json").read_text())["config"]["data"][
                    0 if record["regime"] == "precise" else 1
                ],
                ids={record["id"]},
            )
        )
        np.testing.assert_allclose(record["psi"], fingerprint(row.values))
        steps = json.loads(record["trajectory"])
        assert [s["tool"] for s in steps] == ["list_channels", "robust_zscore_scan"]
        assert finals[record["id"]] not in record["summary"] and finals[record["id"]] not in record["trajectory"]
        assert "robust_zscore_scan" in record["summary"] and record["rationale"] in record["summary"]
    strict = load_bank(
        build_memory(
            tools_run,
            admission="successful",
            min_score=1.0,
            out=tmp_path / "strict.parquet",
            embedder="none",
            include_test_split=True,
        )
    )
    assert len(strict) == (samples["score"] >= 1.0).sum() and not strict.has_phi.any()
    with pytest.raises(ValueError, match="min_score applies"):
        build_memory(tools_run, min_score=0.5, out=tmp_path / "x.parquet", include_test_split=True)


def test_memory_prefixes_precedents_without_answers(tools_run, small_data, tmp_path):
    path = build_memory(tools_run, out=tmp_path / "all.parquet", include_test_split=True)
    samples = pd.read_parquet(tools_run / schema.SAMPLES)
    row = next(r for r in iter_rows(small_data / "test-coarse.parquet") if r.id in set(samples["id"]))
    task = EpisodeTask(row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options)
    memory = MemorySettings(memory_bank=str(path), top_k=3)
    for harness in ("single-pass-text", "tools"):
        outcome = play(
            build_policy("scripted/tools"), Remembering(get_harness(harness), memory), task, HarnessSettings()
        )
        result = outcome.result
        event = result.transcript[0]
        assert event["role"] == "memory" and len(event["precedents"]) == 3
        ids = [p["id"] for p in event["precedents"]]
        assert row.id not in ids and row.source_id not in ids  # itself, and the row it was projected from
        prompt = next(e["content"] for e in result.transcript if e["role"] == "user")
        assert prompt.startswith(MEMORY_HEADER) and prompt.index(MEMORY_HEADER) < prompt.index(row.question[:120])
        for rid in ids:
            final = samples.loc[samples["id"] == rid, "final_message"].iloc[0]
            assert final not in prompt
        assert result.final_message
    unchanged = get_harness("single-pass-text").run(build_policy("scripted/zscore"), task, HarnessSettings())
    assert unchanged.transcript[0]["role"] == "system"


def test_memory_is_played_around_a_chain_harness_too(tools_run, small_data, tmp_path):
    """A harness that plays chains and declares memory gets the prefix on every task of the chain; one
    without the memory capability is never wrapped (eval refuses [memory] for it: test_agents.py)."""
    from tsbench.harness import Harness
    from tsbench.harness.play import episode_outcome

    path = build_memory(tools_run, out=tmp_path / "chain.parquet", include_test_split=True)
    rows = [r for r in iter_rows(small_data / "test-coarse.parquet")][:2]
    tasks = [EpisodeTask(r.id, r.category, r.regime, r.question, r.channel_names, r.values, r.options) for r in rows]
    single = get_harness("single-pass-text")

    class Chained(Harness[HarnessSettings]):
        chains = True

        def run(self, agent, task, cfg):
            return single.run(agent, task, cfg)

        def run_chain(self, agent, tasks, cfg, after=None):
            outcomes = []
            for i, task in enumerate(tasks):
                outcomes.append(episode_outcome(agent, lambda a, task=task: self.run(a, task, cfg), 10_000))
                if after is not None:
                    after(i, outcomes[-1])
            return outcomes

    told = []
    outcomes = Remembering(Chained(), MemorySettings(memory_bank=str(path), top_k=2)).run_chain(
        build_policy("scripted/zscore"), tasks, HarnessSettings(), lambda i, o: told.append(i)
    )
    assert told == [0, 1]
    for outcome, task in zip(outcomes, tasks):
        event = outcome.result.transcript[0]
        prompt = next(e["content"] for e in outcome.result.transcript if e["role"] == "user")
        assert event["role"] == "memory" and len(event["precedents"]) == 2
        assert prompt.startswith(MEMORY_HEADER) and task.question[:80] in prompt
    with pytest.raises(ValueError, match="no memory capability"):
        Remembering(get_harness("file-agent"), MemorySettings(memory_bank=str(path)))


# -- any family with a series builds a bank (through its TaskFamily hooks) ---------------------------

FAMILIES = Path(__file__).parent / "families"


@pytest.fixture(scope="module")
def spike_run(tmp_path_factory):
    """The test family tests/families/spike_count.py, answered by the loopback server: one in three right."""
    sys.path.insert(0, str(FAMILIES))
    from spike_count import FAMILY, write_dataset

    root = tmp_path_factory.mktemp("spikes")
    data = root / "data"
    write_dataset(data, rows=3)
    with FakeOpenAIServer(default='ok:I count them. {"count": 2}') as server:
        cfg = build(
            EvalConfig,
            {
                "family": FAMILY,
                "model": "openai/fake-model",
                "base_url": server.base_url,
                "harness": "single-pass-text",
                "data": [str(data)],
                "concurrency": 2,
                "out": str(root / "run"),
            },
        )
        return run_eval(cfg)


def test_memory_build_from_a_second_family_run_through_the_cli(spike_run, tmp_path):
    samples = pd.read_parquet(spike_run / schema.SAMPLES)
    wanted = samples[samples["score"] >= 0.5]
    assert 0 < len(wanted) < len(samples)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAMILIES), os.environ.get("PYTHONPATH", "")]))
    refused = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "memory",
            "build",
            str(spike_run),
            "--out",
            str(tmp_path / "bank.parquet"),
            "--embedder",
            "none",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert refused.returncode == 2 and "test-split" in refused.stderr and "Traceback" not in refused.stderr
    res = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "memory",
            "build",
            str(spike_run),
            "--out",
            str(tmp_path / "bank.parquet"),
            "--embedder",
            "none",
            "--include-test-split",
            "--admission",
            "successful",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    bank = load_bank(tmp_path / "bank.parquet")
    assert sorted(bank.records["id"]) == sorted(wanted["id"])  # the paper's rule: scoring >= 0.5
    series = pd.read_parquet(spike_run.parent / "data" / "test.parquet").set_index("id")["values"]
    for record in bank.records.to_dict("records"):
        np.testing.assert_allclose(record["psi"], fingerprint(np.asarray([series[record["id"]]], dtype=np.float32)))
        assert record["family"] in ("few", "many") and record["source_id"] == record["id"]
        assert record["length"] == 256 and record["n_channels"] == 1
        assert record["descriptor"].startswith(f"task: {record['family']}\nregime: all\nchannels: x\nHow many spikes")
