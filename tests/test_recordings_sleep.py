"""Sleep-PSG from an EDF+ file this test writes with pyedflib (respiratory events and sleep stages
as EDF+ annotations, SaO2 at a lower rate) and from the CinC 2018 WFDB layout written with wfdb."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pyedflib = pytest.importorskip("pyedflib")

from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.tasks.recordings.sampling import Event  # noqa: E402
from tsbench.tasks.sleep_psg import reader  # noqa: E402

KINDS = [reader.CENTRAL, reader.OBSTRUCTIVE, reader.HYPOPNEA, reader.RERA]
RATES = {"Airflow": 32, "Thor": 32, "ABDO RES": 32, "SpO2": 1}
WAKE_S = 300  # the first five minutes are wake


def write_edf(path: Path, seed: int, minutes: int = 60) -> None:
    rng = np.random.default_rng(seed)
    seconds = minutes * 60
    signals, headers = [], []
    for label, rate in RATES.items():
        t = np.arange(seconds * rate) / rate
        oxygen = label == "SpO2"
        signals.append(
            96 + rng.standard_normal(len(t))
            if oxygen
            else np.sin(2 * np.pi * 0.25 * t) + 0.1 * rng.standard_normal(len(t))
        )
        headers.append(
            {
                "label": label,
                "dimension": "%" if oxygen else "uV",
                "sample_frequency": rate,
                "physical_min": 0 if oxygen else -10,
                "physical_max": 100 if oxygen else 10,
                "digital_min": -32768,
                "digital_max": 32767,
                "transducer": "",
                "prefilter": "",
            }
        )
    with pyedflib.EdfWriter(str(path), len(headers), file_type=pyedflib.FILETYPE_EDFPLUS) as edf:
        edf.setSignalHeaders(headers)
        edf.writeSamples(signals)
        for k, onset in enumerate(range(120, seconds - 120, 200)):
            edf.writeAnnotation(onset, 15 + k % 3, KINDS[k % 4])
        edf.writeAnnotation(1111, 3, "Arousal (spontaneous)")  # blocks windows, never a target
        for epoch in range(0, seconds, 30):
            edf.writeAnnotation(epoch, 30, "Sleep stage W" if epoch < WAKE_S else "Sleep stage 2")


@pytest.fixture(scope="module")
def psg(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("psg")
    write_edf(folder / "p1.edf", 0)
    write_edf(folder / "p2.edf", 1)
    return folder


def test_edf_windows_rules_and_gold_scoring(psg, tmp_path):
    taskset = get_taskset("sleep-psg")
    taskset.generate({"path": str(psg), "seed": 11, "windows": 10}, tmp_path)
    files = taskset.resolve([], seed=11, split="test", root=str(tmp_path), filters={})
    index = taskset.index(files, {})
    assert index["stratum"].value_counts().to_dict() == {**dict.fromkeys(KINDS, 2), "No anomaly": 2}
    edf_events = {}
    for name in ("p1.edf", "p2.edf"):
        with pyedflib.EdfReader(str(psg / name)) as edf:
            onsets, durations, texts = edf.readAnnotations()
        edf_events[name] = [
            (o, o + d, t) for o, d, t in zip(onsets, durations, texts) if not t.startswith("Sleep stage")
        ]
    for rec in index.itertuples():
        sample = taskset.load(SampleRef("sleep-psg", rec.path, rec.id))
        assert sample.task.channel_names == ["AIRFLOW", "CHEST", "ABD", "SaO2"]
        source, gold = json.loads(rec.source), sample.gold
        fs = source["fs"]
        assert fs == 32 and 60 * fs <= rec.length <= 640 * fs and sample.task.values.shape == (4, rec.length)
        t0, t1 = source["start"] / fs, source["end"] / fs
        hits = [e for e in edf_events[source["record"]] if e[0] < t1 and e[1] > t0]
        if gold["answer"] == "No anomaly":
            assert hits == [] and t0 >= WAKE_S  # arousal-free and non-wake
            assert taskset.score(rec.category, gold, '{"kind": "No anomaly"}').score == 1.0
            continue
        assert len(hits) == 1 and hits[0][2] == gold["answer"]  # one respiratory event, no neighbour
        assert (gold["start"], gold["end"]) == (
            round(hits[0][0] * fs) - source["start"],
            round(hits[0][1] * fs) - source["start"],
        )
        assert min(gold["start"], rec.length - gold["end"]) >= 0.05 * rec.length
        message = f'I see it. {{"kind": "{gold["answer"]}", "start": {gold["start"]}, "end": {gold["end"]}}}'
        assert taskset.score(rec.category, gold, message).score == 1.0


def test_cinc2018_wfdb_layout(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    fs, n = 200, 200 * 60 * 30
    rng = np.random.default_rng(0)
    wfdb.wrsamp(
        "tr00-0001",
        fs=fs,
        units=["uV"] * 5,
        sig_name=["C3-M2", "ABD", "CHEST", "AIRFLOW", "SaO2"],
        p_signal=rng.standard_normal((n, 5)),
        fmt=["16"] * 5,
        write_dir=str(tmp_path),
    )
    notes, expected = [(0, "W"), (fs * 120, "N2")], []
    for k, at in enumerate(range(fs * 300, n - fs * 300, fs * 240)):
        label = ["resp_centralapnea", "resp_obstructiveapnea", "resp_hypopnea", "arousal_rera"][k % 4]
        notes += [(at, f"({label}"), (at + fs * 20, f"{label})")]
        expected.append(Event(at, at + fs * 20, KINDS[k % 4]))
    wfdb.wrann(
        "tr00-0001",
        "arousal",
        np.array([a for a, _ in notes]),
        symbol=['"'] * len(notes),
        aux_note=[t for _, t in notes],
        write_dir=str(tmp_path),
        fs=fs,
    )
    sources = reader.read_sources(tmp_path)
    (source,) = sources
    assert source.channel_names == ["AIRFLOW", "CHEST", "ABD", "SaO2"] and source.recording.regions == [(fs * 120, n)]
    assert sorted(source.recording.events, key=lambda e: e.start) == expected  # bouts from "(x" ... "x)" pairs
    block = source.read(1000, 1100)
    assert block.shape == (4, 100)
    record = wfdb.rdrecord(str(tmp_path / "tr00-0001"), sampfrom=1000, sampto=1100)
    assert np.allclose(block[0], record.p_signal[:, 3])  # AIRFLOW is the fourth signal of the file
