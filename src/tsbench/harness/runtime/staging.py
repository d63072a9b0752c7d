"""What the host prepares for a kernel before it starts: everything enters by value.

The series as series.npz bytes (and as context.json, encoded fast), the caller's files (checked to stay
inside the working directory), copies of read-only host paths, and matplotlib's font list (so that plotting
does not rebuild it).
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.jail import WORKDIR
from tsbench.harness.runtime.kernel_boot import SERIES_FILE

CONTEXT_FILE = "context.json"
MATPLOTLIB_DIR = "/tmp/.matplotlib"
# Quiet, single-threaded numerics and no writes outside the working directory, in every kernel mode.
QUIET_ENV = {
    "MPLBACKEND": "Agg",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}

# ipykernel's command-line options in every kernel mode (and the bare floor). The kernel packs its messages with
# json whatever is installed: jupyter_client switches to orjson when present, and orjson's growing output buffer
# takes a 900 MiB print past the kernel's memory bound (it died) where json's stays under it and the host cuts
# the message (message_bound.py).
KERNEL_OPTIONS = ("--HistoryManager.enabled=False", "--Session.packer=json")


def jail_env() -> dict[str, str]:
    """The jailed kernel's whole environment: nothing of the host's but its locale and time zone."""
    env = {
        "PATH": f"{sys.prefix}/bin:/usr/bin:/bin",
        "HOME": WORKDIR,
        "TMPDIR": "/tmp",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "MPLCONFIGDIR": MATPLOTLIB_DIR,
        "IPYTHONDIR": "/tmp/.ipython",
        "JUPYTER_CONFIG_DIR": "/tmp/.jupyter",
        "JUPYTER_DATA_DIR": "/tmp/.jupyter",
        "JUPYTER_RUNTIME_DIR": "/tmp/.jupyter",
        **QUIET_ENV,
    }
    if "TZ" in os.environ:
        env["TZ"] = os.environ["TZ"]
    return env


def stage_unsafe_workdir(
    workdir: Path, series: dict[str, np.ndarray], files: dict[str, bytes], uid: int | None
) -> Path:
    """The unsafe mode's working directory: a host directory the kernel owns, holding what the jail
    would have been given by value."""
    matplotlib_dir = workdir / ".matplotlib"
    matplotlib_dir.mkdir(parents=True)
    for font_list in matplotlib_font_lists():
        shutil.copy(font_list, matplotlib_dir / font_list.name)
    (workdir / SERIES_FILE).write_bytes(series_npz(series))
    for name, data in files.items():
        target = workdir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if uid is not None:
        for path in (workdir, *workdir.rglob("*")):
            os.chown(path, uid, uid)
    return workdir


def as_channel(name: object, values: object) -> np.ndarray:
    """One channel of the series, checked: a 1-D array of real numbers. The kernel gets it as float64;
    a float32, integer or boolean channel is kept as given (no copy; a row's float64 copy would be
    twice its float32 values) and widened one channel at a time as series.npz and context.json are
    written (`float64`), to the same values."""
    array = np.asarray(values)
    if array.dtype.kind not in "fiub" or array.dtype.itemsize > 8:
        array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"channel {name!r} must be one-dimensional, got shape {array.shape}")
    return array


@functools.lru_cache(maxsize=1)
def matplotlib_font_lists() -> tuple[Path, ...]:
    """The host's matplotlib font list files, copied into every sandbox: without them the
    first `import matplotlib.pyplot` in a kernel rebuilds the list (seconds per episode).
    Built once here if the host has none yet."""
    try:
        import matplotlib
    except ImportError:
        return ()
    cache_dir = Path(matplotlib.get_cachedir())
    if not list(cache_dir.glob("fontlist-v*.json")):
        subprocess.run(
            [sys.executable, "-c", "import matplotlib.font_manager"], capture_output=True, timeout=300, check=False
        )
    return tuple(sorted(cache_dir.glob("fontlist-v*.json")))


def float64(values: np.ndarray) -> np.ndarray:
    """A channel as the kernel gets it (no copy when it is float64 already)."""
    return np.asarray(values, dtype=np.float64)


def write_series_npz(handle: BinaryIO, series: dict[str, np.ndarray]) -> None:
    """The series for fast loading in the kernel (json is slow): np.savez's layout (names, then c0..cN
    as float64), written one channel at a time, so no float64 copy of the whole row is ever made."""
    arrays = {"names": np.array(list(series), dtype=str)}
    arrays.update((f"c{index}", values) for index, values in enumerate(series.values()))
    with zipfile.ZipFile(handle, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, values in arrays.items():
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values if key == "names" else float64(values), allow_pickle=False)


def series_npz(series: dict[str, np.ndarray]) -> memoryview:
    """`write_series_npz` into memory (a jail's file by value), returned without a copy of the buffer."""
    buffer = io.BytesIO()
    write_series_npz(buffer, series)
    return buffer.getbuffer()


def write_context_json(path: Path, series: dict[str, np.ndarray]) -> None:
    """context.json as the prompt describes it, {channel: list of floats}, written one channel at a time
    (the GIL is let go between channels). orjson encodes a float64 array ~20x faster than json (a 16 x
    131,072 series: ~0.1 s, not ~1.4 s) with the shortest reprs that read back to the same floats; a
    channel holding NaN or inf goes through json, whose NaN/Infinity tokens orjson would turn into null."""
    with open(path, "wb") as handle:
        handle.write(b"{")
        for index, (name, values) in enumerate(series.items()):
            values = float64(values)
            handle.write(b", " if index else b"")
            handle.write(orjson.dumps(str(name)) + b": ")
            if np.isfinite(values).all():
                handle.write(orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY))
            else:
                handle.write(json.dumps(values.tolist()).encode())
        handle.write(b"}")


def checked_files(files: dict[str, bytes] | None) -> dict[str, bytes]:
    """Relative paths only, never leaving the working directory."""
    checked = {}
    for name, data in (files or {}).items():
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or name in (SERIES_FILE, CONTEXT_FILE):
            raise ValueError(f"sandbox file names must be relative paths inside the working directory: {name!r}")
        checked[str(Path(*parts))] = bytes(data)
    return checked


def stage_copy(source: Path, target: Path) -> Path:
    """A world-readable copy of a host file or directory (the jail's uid may not read the original)."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=False)
        for folder, _subdirs, names in os.walk(target):
            os.chmod(folder, 0o755)
            for name in names:
                os.chmod(os.path.join(folder, name), 0o644)
    elif source.is_file():
        shutil.copy(source, target)
        os.chmod(target, 0o644)
    else:
        raise SandboxError(f"readonly path {source} does not exist")
    return target
