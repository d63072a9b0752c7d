"""What the host prepares for a kernel before it starts: everything enters by value.

The series as series.npz bytes, the caller's files (checked to stay inside the working directory),
copies of read-only host paths, and matplotlib's font list (so that plotting does not rebuild it).
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.kernel_boot import SERIES_FILE

CONTEXT_FILE = "context.json"


def as_channel(name: object, values: object) -> np.ndarray:
    """One channel of the series as the kernel gets it: a 1-D float64 array."""
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


def series_npz(series: dict[str, np.ndarray]) -> bytes:
    """A binary copy of the series for fast loading in the kernel (json is slow)."""
    buffer = io.BytesIO()
    arrays = {f"c{index}": values for index, values in enumerate(series.values())}
    np.savez(buffer, names=np.array(list(series), dtype=str), **arrays)
    return buffer.getvalue()


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
