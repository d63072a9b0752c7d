"""Readers of TimerBed's public releases, each in the format it is published in (nothing is
downloaded; --path DIR holds what the user has):

* RCW, TEE, CTU: the UCR/UEA archive files (RightWhaleCalls, Lightning7, Computers), `<Name>_TRAIN`
  and `<Name>_TEST` as .ts, .arff or .tsv, read with aeon's loaders; the archive's train/test split.
  Any other archive dataset under DIR is read the same way, as a category of its own.
* ECG: the PhysioNet/CinC Challenge 2017 training set (AliveCor single lead, 300 Hz): a folder with
  REFERENCE.csv and the WFDB records it names (A00001.hea + .mat), read with wfdb.
* EMG: the PhysioNet EMG examples (emgdb, 4 kHz): the WFDB records emg_healthy, emg_myopathy and
  emg_neuropathy (.hea + .dat), read with wfdb.
* HAR: the UCI HAR Dataset's raw signals, `<split>/Inertial Signals/body_acc_{x,y,z}_<split>.txt`
  with `<split>/y_<split>.txt`; the dataset's train/test split (subjects disjoint).

Missing values stay NaN, as aeon reads them (`?` in a .ts file, inside a series or at its end): a plot
shows a gap, never a false drop to 0. Only .arff and .tsv lose trailing all-NaN columns, the padding
those formats give series of unequal length.

ECG and EMG records are cut into non-overlapping windows of the paper's length (1500 samples; the
remainder of a record is dropped). A record shorter than one window gives no row; such records are
counted per split (`Release.short_records`), and `tsbench generate` reports them.

Neither release has a split, so one is fixed here that depends only
on the data: per class, the 20% of units with the smallest blake2b hash of their name are the test
split (ECG: whole records, so no recording is in both; EMG: windows, as its three records are one per
class). On EMG's 205 windows this gives the paper's test size, 41 (Table 1's EMG accuracies are
multiples of 1/41).
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.recordings.sources import require
from tsbench.tasks.timerbed.labels import TASKS, task_of

FAMILY = "timerbed"
WINDOW = 1500  # ECG and EMG window length (TimeMaster Table 4)
TEST_SHARE = 0.2
SPLIT_SUFFIX = {"train": "_TRAIN", "test": "_TEST"}
ARCHIVE_FORMATS = (".ts", ".arff", ".tsv")  # preferred first when a dataset comes in several
EMG_RECORDS = ("emg_healthy", "emg_myopathy", "emg_neuropathy")
HAR_AXES = ("body_acc_x", "body_acc_y", "body_acc_z")
TEXT_BYTES = 2**31  # one archive or HAR text file (UEA RightWhaleCalls' _TRAIN.ts is a few hundred MB)

PUBLISHED = {
    "rcw": "UEA archive RightWhaleCalls (timeseriesclassification.com): RightWhaleCalls_TRAIN.ts and _TEST.ts",
    "tee": "UCR archive Lightning7 (timeseriesclassification.com): Lightning7_TRAIN.ts/.arff and _TEST",
    "ctu": "UCR archive Computers (timeseriesclassification.com): Computers_TRAIN.ts/.arff and _TEST",
    "ecg": "PhysioNet/CinC Challenge 2017 training set (physionet.org/content/challenge-2017): "
    "training2017/REFERENCE.csv with its WFDB records A00001.hea + .mat, ...",
    "emg": "PhysioNet EMG examples (physionet.org/content/emgdb): emg_healthy, emg_myopathy, emg_neuropathy "
    "as .hea + .dat",
    "har": "UCI HAR Dataset (archive.ics.uci.edu, 'Human Activity Recognition Using Smartphones'): "
    "train/ and test/ with 'Inertial Signals'/body_acc_[xyz]_<split>.txt and y_<split>.txt",
}


def where_published() -> str:
    return "; ".join(f"{TASKS[t].short}: {PUBLISHED[t]}" for t in PUBLISHED)


@dataclass
class Series:
    """One series as the release has it: values (channels, L), its class code, where it came from."""

    values: np.ndarray
    label: str
    source: dict

    def __post_init__(self) -> None:  # float32 copies: a 40k-window ECG split stays a few hundred MB
        self.values = np.ascontiguousarray(self.values, dtype=np.float32)


@dataclass
class Release:
    """One task's files under --path and how to read one split of them."""

    category: str  # a TimerBed task code, or the lower-cased name of another archive dataset
    dataset: str  # the name the release uses
    kind: str  # archive | cinc2017 | emgdb | uci-har
    files: dict[str, list[Path]] = field(default_factory=dict)  # split -> files read
    root: Path | None = None
    folder: UserFolder | None = None  # --path: every file is read through its checks (and recorded)
    short_records: dict[str, list[str]] = field(default_factory=dict)  # split -> records under one window

    def read(self, split: str) -> Iterator[Series]:
        reader = {"archive": _read_archive, "cinc2017": _read_cinc, "emgdb": _read_emg, "uci-har": _read_har}
        return reader[self.kind](self, split)

    def check(self) -> None:
        """Check every file a read of any split opens (where it leads, what it is, its budget; a WFDB
        record's header and the files it names) before a row of any split is written."""
        if self.kind in ("archive", "uci-har"):
            for file in (f for files in self.files.values() for f in files):
                self.folder.sized_path(file, TEXT_BYTES)
            return
        wfdb = require("wfdb", FAMILY)
        if self.kind == "cinc2017":
            for record in _cinc_labels(self):
                _wfdb_checked(wfdb, self.folder, _cinc_place(self, record), "a CinC 2017 WFDB record")
        else:
            for record in EMG_RECORDS:
                _wfdb_checked(wfdb, self.folder, self.root / record, "an emgdb WFDB record")


def odd_file(path: Path, what: str, exc: Exception | None = None) -> UserError:
    why = f" ({type(exc).__name__}: {str(exc)[:120]})" if exc is not None else ""
    return UserError(f"{path} is not {what}{why}; --family {FAMILY} reads {where_published()}")


def fixed_split(units: dict[str, str]) -> dict[str, str]:
    """unit name -> "test" or "train": ceil(20%) of all units are test (sklearn's test_size rounding),
    shared over the classes (units' values) by largest remainder, at least one from every class that has
    two or more; within a class, the units with the smallest blake2b hashes of their names."""
    by_class: dict[str, list[str]] = {}
    for name, label in sorted(units.items()):
        by_class.setdefault(label, []).append(name)
    total = len(units)
    wanted = math.ceil(TEST_SHARE * total - 1e-9)
    exact = {label: wanted * len(names) / total for label, names in by_class.items()}
    quota = {label: int(share) for label, share in exact.items()}
    for label in sorted(exact, key=lambda k: (quota[k] - exact[k], k))[: wanted - sum(quota.values())]:
        quota[label] += 1
    for label, names in by_class.items():
        if quota[label] == 0 and len(names) >= 2:
            quota[label] = 1
            donor = max(quota, key=lambda k: (quota[k] - 1 if len(by_class[k]) > 2 else -1, k))
            if quota[donor] > 1:
                quota[donor] -= 1
    out = {}
    for label, names in by_class.items():
        ranked = sorted(names, key=lambda n: hashlib.blake2b(n.encode(), digest_size=8).hexdigest())
        test = set(ranked[: quota[label]])
        out.update({n: "test" if n in test else "train" for n in names})
    return out


def windows(signal: np.ndarray, length: int = WINDOW) -> list[np.ndarray]:
    """Non-overlapping windows of `length` samples of a 1-D signal, the remainder dropped."""
    return [signal[k : k + length] for k in range(0, len(signal) - length + 1, length)]


# -- finding the releases ------------------------------------------------------------------------------
def find_releases(path: Path | UserFolder) -> list[Release]:
    """Every release under `path` (a folder, or one archive file), in task order."""
    folder = user_folder(path, FAMILY)
    path = folder.given
    files = folder.walk()
    found = _find_archives(files)
    if path.is_dir():
        for finder in (_find_cinc, _find_emg, _find_har):
            release = finder(path, files)
            if release is not None and release.category not in {r.category for r in found}:
                found.append(release)
    for release in found:
        release.folder = folder
    order = {code: i for i, code in enumerate(TASKS)}
    return sorted(found, key=lambda r: (order.get(r.category, len(order)), r.category))


def _find_archives(files: list[Path]) -> list[Release]:
    candidates = [p for p in files if p.suffix.lower() in ARCHIVE_FORMATS]
    chosen: dict[tuple[str, str], Path] = {}
    for file in candidates:
        for split, suffix in SPLIT_SUFFIX.items():
            if file.stem.upper().endswith(suffix):
                key = (file.stem[: -len(suffix)], split)
                best = chosen.get(key)
                rank = ARCHIVE_FORMATS.index(file.suffix.lower()) if file.suffix.lower() in ARCHIVE_FORMATS else 9
                if best is None or rank < ARCHIVE_FORMATS.index(best.suffix.lower()):
                    chosen[key] = file
    releases: dict[str, Release] = {}
    for (name, split), file in sorted(chosen.items()):
        spec = task_of(name)
        category = spec.code if spec else name.lower()
        release = releases.setdefault(category, Release(category, name, "archive"))
        release.files.setdefault(split, []).append(file)
    return list(releases.values())


def _find_cinc(path: Path, files: list[Path]) -> Release | None:
    found = [f for f in files if f.name == "REFERENCE.csv"]
    if not found:
        return None
    # The challenge also ships sample2017/validation (300 of the training records): take the training set.
    reference = max(found, key=lambda f: (f.parent.name == "training2017", f.stat().st_size))
    return Release("ecg", "PhysioNet/CinC 2017", "cinc2017", root=reference.parent, files={"all": [reference]})


def _find_emg(path: Path, files: list[Path]) -> Release | None:
    headers = {h.stem: h for h in files if h.suffix == ".hea" and h.stem in EMG_RECORDS}
    if not headers:
        return None
    missing = [r for r in EMG_RECORDS if r not in headers]
    if missing:
        raise UserError(
            f"EMG: records {missing} are missing under {path} (found {sorted(headers)}); "
            f"--family {FAMILY} reads {PUBLISHED['emg']}"
        )
    return Release(
        "emg", "PhysioNet emgdb", "emgdb", root=headers[EMG_RECORDS[0]].parent, files={"all": list(headers.values())}
    )


def _find_har(path: Path, files: list[Path]) -> Release | None:
    labels = [f for f in files if f.name == "y_train.txt"] + [f for f in files if f.name == "y_test.txt"]
    if not labels:
        return None
    root = labels[0].parent.parent
    files: dict[str, list[Path]] = {}
    for split in SPLIT_SUFFIX:
        folder = root / split
        wanted = [folder / f"y_{split}.txt"] + [folder / "Inertial Signals" / f"{a}_{split}.txt" for a in HAR_AXES]
        if wanted[0].is_file():
            missing = [str(w.relative_to(root)) for w in wanted if not w.is_file()]
            if missing:
                extra = " (X_<split>.txt holds 561 features, not the series TimerBed plots)"
                raise UserError(
                    f"HAR: {missing} missing under {root}{extra}; --family {FAMILY} reads {PUBLISHED['har']}"
                )
            files[split] = wanted
    return Release("har", "UCI HAR", "uci-har", root=root, files=files)


# -- reading one split ---------------------------------------------------------------------------------
def _read_archive(release: Release, split: str) -> Iterator[Series]:
    loaders = require("aeon.datasets", FAMILY)
    for file in release.files.get(split, []):
        suffix = file.suffix.lower()
        file = Path(release.folder.sized_path(file, TEXT_BYTES))
        try:
            if suffix == ".ts":
                X, y = loaders.load_from_ts_file(str(file))
            elif suffix == ".arff":
                X, y = loaders.load_from_arff_file(str(file))
            else:
                X, y = loaders.load_from_tsv_file(str(file))
        except Exception as exc:  # aeon raises IOError, ValueError and others for malformed files
            raise odd_file(file, f"a readable UCR/UEA {suffix} file", exc) from None
        if len(y) == 0 or len(X) != len(y):
            raise odd_file(file, f"a readable UCR/UEA {suffix} file (no labelled series in it)")
        for i in range(len(y)):
            values = np.atleast_2d(np.asarray(X[i], dtype=np.float64))
            yield Series(values if suffix == ".ts" else _unpadded(values), _code(y[i]), {"file": file.name, "index": i})


def _cinc_labels(release: Release) -> dict[str, str]:
    reference = release.files["all"][0]
    try:
        with release.folder.open_text(reference, newline="") as handle:
            labels = {row[0].strip(): row[1].strip() for row in csv.reader(handle) if len(row) >= 2}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise odd_file(reference, "the CinC 2017 REFERENCE.csv (record,label lines)", exc) from None
    if not labels:
        raise odd_file(reference, "the CinC 2017 REFERENCE.csv (record,label lines)")
    return labels


def _cinc_place(release: Release, record: str) -> Path:
    """Where a record REFERENCE.csv names lies: a name from a file, so never out of --path."""
    return release.folder.named(release.root, record, release.files["all"][0])


def _read_cinc(release: Release, split: str) -> Iterator[Series]:
    wfdb = require("wfdb", FAMILY)
    labels = _cinc_labels(release)
    assigned = fixed_split(labels)
    short = release.short_records.setdefault(split, [])
    for record in sorted(labels):
        if split != "all" and assigned[record] != split:
            continue
        signal = _wfdb_signal(wfdb, release.folder, _cinc_place(release, record), "a CinC 2017 WFDB record")
        if len(signal) < WINDOW:
            short.append(record)
        for k, window in enumerate(windows(signal)):
            yield Series(window[None, :], labels[record], {"record": record, "window": k, "start": k * WINDOW})


def _read_emg(release: Release, split: str) -> Iterator[Series]:
    wfdb = require("wfdb", FAMILY)
    cut = {
        record: windows(_wfdb_signal(wfdb, release.folder, release.root / record, "an emgdb WFDB record"))
        for record in EMG_RECORDS
    }
    release.short_records[split] = [record for record, parts in cut.items() if not parts]
    units = {f"{record}/{k}": record for record, parts in cut.items() for k in range(len(parts))}
    assigned = fixed_split(units)
    for record, parts in cut.items():
        for k, window in enumerate(parts):
            if split == "all" or assigned[f"{record}/{k}"] == split:
                yield Series(window[None, :], record, {"record": record, "window": k, "start": k * WINDOW})


def _read_har(release: Release, split: str) -> Iterator[Series]:
    files = release.files.get(split)
    if not files:
        return
    try:
        text = [release.folder.sized_path(f, TEXT_BYTES) for f in files]
        labels = np.loadtxt(text[0], dtype=np.int64, ndmin=1)
        axes = [np.loadtxt(f, dtype=np.float64, ndmin=2) for f in text[1:]]
    except ValueError as exc:
        raise odd_file(files[0].parent, "UCI HAR text files (whitespace-separated numbers)", exc) from None
    if any(a.shape != axes[0].shape for a in axes) or axes[0].shape[0] != len(labels):
        shapes = [a.shape for a in axes]
        raise odd_file(files[0].parent, f"consistent UCI HAR files (y: {len(labels)} rows, signals: {shapes})")
    stacked = np.stack(axes, axis=1)  # (N, 3, 128)
    for i in range(len(labels)):
        yield Series(stacked[i], str(int(labels[i])), {"file": f"{split}/Inertial Signals", "index": i})


def _code(value) -> str:
    """A class value as text; a float that is a whole number (pandas reads .tsv labels as numbers) as an int."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _wfdb_checked(wfdb, folder: UserFolder, record: Path, what: str) -> None:
    """The record's header and every file it names checked, its whole length within the budget."""
    if not folder.is_file(record.parent / f"{record.name}.hea"):
        raise odd_file(record, what)
    folder.wfdb_header(wfdb, record)


def _wfdb_signal(wfdb, folder: UserFolder, record: Path, what: str) -> np.ndarray:
    """The record's first channel, read whole once its header and every file it names are checked."""
    _wfdb_checked(wfdb, folder, record, what)
    try:
        signal = wfdb.rdrecord(str(record)).p_signal
    except Exception as exc:  # wfdb raises FileNotFoundError, ValueError and others
        raise odd_file(record, what, exc) from None
    if signal is None or signal.ndim != 2 or signal.shape[1] < 1:
        raise odd_file(record, what)
    return signal[:, 0].astype(np.float64)  # an invalid sample stays NaN


def _unpadded(series: np.ndarray) -> np.ndarray:
    """(channels, L) without the trailing columns that are NaN in every channel (.arff/.tsv padding)."""
    kept = ~np.isnan(series).all(axis=0)
    last = len(kept) - int(np.argmax(kept[::-1])) if kept.any() else series.shape[1]
    return series[:, :last]
