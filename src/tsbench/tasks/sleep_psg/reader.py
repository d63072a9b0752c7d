"""Polysomnograms as sampler inputs: four respiratory channels, respiratory events, sleep stages.

Two layouts are read:

* EDF/EDF+ (`*.edf`), annotations inside the file (an EDF+ annotation signal). Read with
  pyedflib: a maintained reader and writer of EDF+/BDF+ with annotations, numpy its only
  dependency, that reads any sample range of one signal without loading the night (mne would
  pull in a large stack for the same two calls).
* The PhysioNet/CinC Challenge 2018 release (WFDB `<record>.hea` + signals + `<record>.arousal`,
  events as "(resp_hypopnea" ... "resp_hypopnea)" pairs, stages as "W", "N1", ... notes), read
  with wfdb.

Channels are picked by name: AIRFLOW, CHEST, ABD, SaO2 (common aliases accepted); a recording
without all four is skipped. Channels recorded at lower rates are linearly interpolated onto the
fastest one's grid. Targets: central apnea, obstructive apnea, hypopnea, RERA; their gold window
is the annotated bout. Every apnea, hypopnea, RERA or arousal annotation blocks windows. Regions
(for anomaly-free windows): the non-wake stage spans; all of the night when there are no stages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.recordings.clinical import Source
from tsbench.tasks.recordings.sampling import Event, Recording
from tsbench.tasks.recordings.sources import nothing_found, require

FAMILY = "sleep-psg"
CENTRAL, OBSTRUCTIVE, HYPOPNEA, RERA = "Central Apnea", "Obstructive Apnea", "Hypopnea", "RERA"
KIND_PATTERNS = (
    (CENTRAL, re.compile(r"central\s*_?apn", re.I)),
    (OBSTRUCTIVE, re.compile(r"obstructive\s*_?apn", re.I)),
    (HYPOPNEA, re.compile(r"hypopn", re.I)),
    (RERA, re.compile(r"\brera\b|_rera\b|respiratory effort related", re.I)),
)
BLOCKING = re.compile(r"apn|hypopn|rera|arous", re.I)
STAGE = re.compile(r"^(?:sleep stage|stage)?\s*(w|wake|n1|n2|n3|n4|r|rem|1|2|3|4|\?)(?:\s+sleep)?$", re.I)
WAKE = {"w", "wake"}
UNKNOWN_STAGE = {"?"}
CHANNELS = (
    ("AIRFLOW", ("airflow", "flow", "nasal", "thermistor", "cannula")),
    ("CHEST", ("chest", "thor")),
    ("ABD", ("abd", "abdo")),
    ("SaO2", ("sao2", "spo2", "oxygen", "sat")),
)
AROUSAL_ANNOTATION = "arousal"
MAX_WINDOW = 131_072  # the family's longest window (WindowRules.cap): the most samples read at once


def pick_channels(labels: list[str]) -> list[int] | None:
    """Index of AIRFLOW, CHEST, ABD, SaO2 among `labels` (first alias match), or None."""
    lowered = [label.strip().lower() for label in labels]
    picked = []
    for _, aliases in CHANNELS:
        hit = next(
            (i for alias in aliases for i, label in enumerate(lowered) if alias in label and i not in picked), None
        )
        if hit is None:
            return None
        picked.append(hit)
    return picked


def kind_of(label: str) -> str | None:
    return next((kind for kind, pattern in KIND_PATTERNS if pattern.search(label)), None)


def stage_of(label: str) -> str | None:
    found = STAGE.match(label.strip())
    return found.group(1).lower() if found else None


def build_recording(key: str, fs: float, length: int, annotations: list[tuple[int, int, str]]) -> Recording:
    """`annotations`: (start, end or -1 when unknown, label) in samples at `fs`."""
    events, stages = [], []
    for start, end, label in annotations:
        stage = stage_of(label)
        if stage is not None:
            stages.append((start, end, stage))
        elif BLOCKING.search(label):
            events.append(Event(start, max(end, start + 1), kind_of(label)))
    return Recording(key=key, length=length, fs=fs, events=events, regions=_sleep_regions(stages, length))


def _sleep_regions(stages: list[tuple[int, int, str]], length: int) -> list[tuple[int, int]] | None:
    if not stages:
        return None
    stages = sorted(stages)
    spans = []
    for k, (start, end, stage) in enumerate(stages):
        if end <= start:  # no duration: the stage lasts until the next one
            end = stages[k + 1][0] if k + 1 < len(stages) else length
        if stage not in WAKE and stage not in UNKNOWN_STAGE:
            spans.append((start, min(end, length)))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _resampled(read_channel: Callable[[int, int, int], np.ndarray], rates: list[float], counts: list[int], fs: float):
    """A window reader on the `fs` grid from per-channel readers (channel, first, n) at their own rates."""

    def read(start: int, end: int) -> np.ndarray:
        out = np.empty((len(rates), end - start))
        for c, (rate, count) in enumerate(zip(rates, counts)):
            if rate == fs:
                out[c] = read_channel(c, start, end - start)
                continue
            positions = np.arange(start, end) * (rate / fs)
            first = max(0, math.floor(positions[0]))
            last = min(count, math.ceil(positions[-1]) + 2)
            chunk = read_channel(c, first, last - first)
            out[c] = np.interp(positions - first, np.arange(len(chunk)), chunk)
        return out

    return read


def _edf_source(pyedflib, path: Path, key: str) -> Source | None:
    try:
        edf = pyedflib.EdfReader(str(path))
    except OSError as exc:  # pyedflib's one error for a file it cannot parse
        raise UserError(f"{key} is not a readable EDF/EDF+ file ({str(exc)[:160]})") from None
    with edf:
        picked = pick_channels(edf.getSignalLabels())
        if picked is None:
            return None
        rates = [float(edf.getSampleFrequency(i)) for i in picked]
        counts = [int(edf.getNSamples()[i]) for i in picked]
        onsets, durations, texts = edf.readAnnotations()
    fs = max(rates)
    length = min(math.floor(n / r * fs) for n, r in zip(counts, rates))
    annotations = [
        (round(o * fs), round((o + d) * fs) if d > 0 else -1, str(t)) for o, d, t in zip(onsets, durations, texts)
    ]

    def read_channel(c: int, first: int, n: int) -> np.ndarray:
        with pyedflib.EdfReader(str(path)) as edf:
            return edf.readSignal(picked[c], start=first, n=n)

    recording = build_recording(key, fs, length, annotations)
    return Source(recording, [name for name, _ in CHANNELS], _resampled(read_channel, rates, counts, fs))


def _wfdb_source(wfdb, folder: UserFolder, stem: Path) -> Source | None:
    header = folder.wfdb_header(wfdb, stem, read=MAX_WINDOW)
    picked = pick_channels(list(header.sig_name))
    if picked is None:
        return None
    fs, length = float(header.fs), int(header.sig_len)
    folder.check(_annotation(stem))
    ann = wfdb.rdann(str(stem), AROUSAL_ANNOTATION)
    notes = [str(n or "").strip() for n in (ann.aux_note or [])]
    annotations, opened = [], {}
    for at, note in zip(ann.sample, notes):
        at = int(at)
        if note.startswith("("):
            opened[note[1:]] = at
        elif note.endswith(")") and note[:-1] in opened:
            annotations.append((opened.pop(note[:-1]), at, note[:-1]))
        elif note:
            annotations.append((at, -1, note))

    def read(start: int, end: int) -> np.ndarray:
        record = wfdb.rdrecord(str(stem), sampfrom=start, sampto=end, channels=picked, physical=True)
        return np.asarray(record.p_signal, dtype=np.float64).T

    return Source(build_recording(folder.label(stem), fs, length, annotations), [name for name, _ in CHANNELS], read)


def _annotation(stem: Path) -> Path:
    return stem.parent / f"{stem.name}.{AROUSAL_ANNOTATION}"


def read_sources(path: Path | UserFolder) -> list[Source]:
    """Every recording under --path with the four channels (others are skipped, as documented above),
    each file it reads checked by the folder first."""
    folder = user_folder(path, FAMILY)
    given = folder.given
    edfs = folder.walk(lambda p: p.suffix.lower() == ".edf") if given.is_dir() else [given]
    edfs = [p for p in edfs if p.suffix.lower() == ".edf"]
    heads = folder.walk(lambda p: p.suffix == ".hea") if given.is_dir() else []
    stems = [h.with_suffix("") for h in heads if folder.is_file(_annotation(h.with_suffix("")))]
    if not edfs and not stems:
        raise nothing_found(given, FAMILY, "EDF/EDF+ files or WFDB records with .arousal annotations")
    sources = []
    if edfs:
        pyedflib = require("pyedflib", FAMILY)
        sources += [s for edf in edfs if (s := _edf_source(pyedflib, Path(folder.path(edf)), folder.label(edf)))]
    if stems:
        wfdb = require("wfdb", FAMILY)
        sources += [s for stem in stems if (s := _wfdb_source(wfdb, folder, stem)) is not None]
    if not sources:
        raise nothing_found(given, FAMILY, "recordings with AIRFLOW, CHEST, ABD and SaO2 channels")
    return sources
