"""Provenance for every artefact: versions, git commit and file hashes, written as small JSON."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import tsbench

TRACKED_PACKAGES = ("numpy", "scipy", "pyarrow", "pandas", "torch", "transformers", "openai")


def git_commit() -> str | None:
    """The commit of the tsbench checkout, or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5)
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def versions(packages=TRACKED_PACKAGES) -> dict[str, str]:
    found = {"tsbench": tsbench.__version__, "python": platform.python_version()}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def sha256_file(path: str | Path, chunk: int = 2**22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def write_json(path: str | Path, data: dict) -> None:
    """Write atomically (temp file + rename) so a crash never leaves half a manifest."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    tmp.replace(path)


def read_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
