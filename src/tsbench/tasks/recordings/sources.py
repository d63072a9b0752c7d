"""Where each public dataset comes from, and the checks `generate` makes before reading any of it.

Nothing is downloaded: the user points --path at files they already have. When the path is
missing or holds nothing usable, the one-line error says where the files are published.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from tsbench.core.errors import UserError

EXTRA = "pip install 'tsbench[recordings]'"

SOURCES = {
    "ltaf": "the Long-Term AF Database (LTAFDB, Petrutiu et al. 2007) on PhysioNet (physionet.org/content/ltafdb): "
    "a folder of WFDB records, <record>.hea + .dat with .atr beat/rhythm annotations",
    "sleep-psg": "the PhysioNet/CinC Challenge 2018 polysomnograms (Ghassemi et al. 2018, "
    "physionet.org/content/challenge-2018), the Sleep-PSG source the paper cites, exported as EDF+ "
    "with the respiratory events as annotations; or its WFDB records (<record>.hea + .arousal) as released",
    "arfbench": "ARFBench (Xie et al. 2026), the Datadog/ARFBench dataset on Hugging Face: a folder with "
    "arfbench-qa.csv and arfbench-data/<query_group>_<interval>.parquet",
    "timerbed": "TimerBed (VL-Time, Liu et al. 2025; used by TimeMaster) from its public releases: UCR/UEA "
    "RightWhaleCalls, Lightning7, Computers (<Name>_TRAIN/_TEST .ts/.arff/.tsv), PhysioNet/CinC 2017 "
    "(REFERENCE.csv + WFDB records), PhysioNet emgdb (emg_healthy/myopathy/neuropathy .hea+.dat), "
    "UCI HAR Dataset (train|test/Inertial Signals/body_acc_[xyz]_<split>.txt + y_<split>.txt)",
}


def require(module: str, family: str) -> ModuleType:
    """Import an optional reader, or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"--family {family} reads its files with {module.split('.')[0]}: {EXTRA}") from None


def source_path(options: dict, family: str, published: str | None = None) -> Path:
    """The --path folder (or file), which must exist; `published` says where (default: SOURCES)."""
    published = published or SOURCES[family]
    raw = options.get("path")
    if not raw:
        raise UserError(f"--family {family} needs --path DIR: {published}")
    path = Path(raw).expanduser()
    if not path.exists():
        raise UserError(f"--path {path} does not exist; --family {family} reads {published}")
    return path


def nothing_found(path: Path, family: str, what: str) -> UserError:
    return UserError(f"no {what} under {path}; --family {family} reads {SOURCES[family]}")


def refuse_unknown(options: dict, allowed: Iterable[str], family: str) -> None:
    unknown = sorted(set(options) - set(allowed) - {"seed"})
    if unknown:
        flags = ", ".join("--" + u.replace("_", "-") for u in unknown)
        raise UserError(f"option(s) {flags} do not apply to --family {family}")


def stable_id(*parts: object) -> str:
    """A short id that depends only on where a row came from."""
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=6).hexdigest()
