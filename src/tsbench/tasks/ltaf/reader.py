"""LTAFDB records (WFDB: <record>.hea + signal files, beat and rhythm annotations in <record>.atr)
as sampler inputs, read with the `wfdb` package.

* Regions: normal-sinus-rhythm bouts, from a rhythm annotation ('+' with aux note "(N") to the
  next rhythm annotation. A record without rhythm annotations counts as sinus throughout.
* Targets: a PVC ('V') or APC ('A') beat; its gold window is its RR bracket, from the previous
  beat annotation to the next one.
* Blockers: every other non-normal beat (its RR bracket) and every non-beat annotation other
  than rhythm changes (noise '~', artifacts '|', ...), so a window holds no other abnormal beat.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.recordings.clinical import Source
from tsbench.tasks.recordings.sampling import Event, Recording
from tsbench.tasks.recordings.sources import nothing_found, require

FAMILY = "ltaf"
ANNOTATION = "atr"
PVC = "Premature Ventricular Contraction (PVC)"
APC = "Premature Atrial Contraction (APC)"
TARGETS = {"V": PVC, "A": APC}
BEAT_SYMBOLS = set("NLRBAaJSVrFejnE/fQ?")  # the WFDB beat annotation codes
NORMAL = "N"
RHYTHM = "+"
SINUS = "(N"
MAX_WINDOW = 131_072  # the family's longest window (WindowRules.cap): the most samples read at once


def records(folder: UserFolder) -> list[Path]:
    """Record stems (no suffix) under --path that have a header and beat annotations."""
    given = folder.given
    heads = folder.walk(lambda p: p.suffix == ".hea") if given.is_dir() else [given.with_suffix(".hea")]
    return [h.with_suffix("") for h in heads if folder.is_file(h) and folder.is_file(h.with_suffix(f".{ANNOTATION}"))]


def sinus_regions(samples: np.ndarray, symbols: list[str], notes: list[str], length: int) -> list[tuple[int, int]]:
    changes = [(int(s), (n or "").strip()) for s, sym, n in zip(samples, symbols, notes) if sym == RHYTHM]
    if not changes:
        return [(0, length)]
    regions = []
    for (start, rhythm), (end, _) in zip(changes, changes[1:] + [(length, "")]):
        if rhythm == SINUS and end > start:
            regions.append((start, end))
    return regions


def events(samples: np.ndarray, symbols: list[str]) -> list[Event]:
    beats = [(int(s), sym) for s, sym in zip(samples, symbols) if sym in BEAT_SYMBOLS]
    found = []
    for k, (at, sym) in enumerate(beats):
        if sym == NORMAL:
            continue
        before = beats[k - 1][0] if k > 0 else at
        after = beats[k + 1][0] if k + 1 < len(beats) else at + 1
        kind = TARGETS.get(sym) if 0 < k < len(beats) - 1 else None
        found.append(Event(before, max(after, at + 1), kind))
    found += [
        Event(int(s), int(s) + 1, None) for s, sym in zip(samples, symbols) if sym not in BEAT_SYMBOLS and sym != RHYTHM
    ]
    return found


def read_sources(path: Path | UserFolder) -> list[Source]:
    """Every LTAF-style record under --path, each file it reads checked by the folder first."""
    folder = user_folder(path, FAMILY)
    wfdb = require("wfdb", FAMILY)
    stems = records(folder)
    if not stems:
        raise nothing_found(folder.given, FAMILY, f"WFDB records with .{ANNOTATION} annotations")
    sources = []
    for stem in stems:
        header = folder.wfdb_header(wfdb, stem, read=MAX_WINDOW)
        folder.check(stem.with_suffix(f".{ANNOTATION}"))
        ann = wfdb.rdann(str(stem), ANNOTATION)
        length = int(header.sig_len)
        notes = list(ann.aux_note) if ann.aux_note is not None else [""] * len(ann.sample)
        recording = Recording(
            key=folder.label(stem),
            length=length,
            fs=float(header.fs),
            events=events(ann.sample, list(ann.symbol)),
            regions=sinus_regions(ann.sample, list(ann.symbol), notes, length),
        )
        names = [f"ECG_{i}" for i in range(int(header.n_sig))]
        sources.append(Source(recording, names, _reader(wfdb, stem)))
    return sources


def _reader(wfdb, stem: Path):
    def read(start: int, end: int) -> np.ndarray:
        record = wfdb.rdrecord(str(stem), sampfrom=start, sampto=end, physical=True)
        return np.asarray(record.p_signal, dtype=np.float64).T

    return read
