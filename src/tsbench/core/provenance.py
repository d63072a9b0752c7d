"""Provenance for every artefact: versions, git commit and file hashes, written as small JSON."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import tsbench
from tsbench.core import json_input
from tsbench.core.errors import UserError

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
    dirty = subprocess.run(
        ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
    )
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


HASH_CACHE = "file_sha256.json"


def cache_dir() -> Path:
    """TSBENCH_CACHE if set, else the platform's user cache dir for tsbench."""
    override = os.environ.get("TSBENCH_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tsbench"))


def file_sha256(path: str | Path) -> str:
    """The sha256 of the bytes on disk now (streamed), remembered by (path, size, mtime): a data
    file is hashed once per change, not once per eval. Any write to a file moves its mtime, so a
    cached hash is never one of other bytes; an unwritable cache only costs the re-hash."""
    path = Path(path).resolve()
    stat = path.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    cache = cache_dir() / HASH_CACHE
    try:
        known = read_json(cache)
    except (OSError, ValueError):
        known = {}
    entry = known.get(str(path)) if isinstance(known, dict) else None
    if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = sha256_file(path)
    known = known if isinstance(known, dict) else {}
    known[str(path)] = {**stamp, "sha256": digest}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_json(cache, known)
    except OSError:
        pass
    return digest


def checked_identity(identity: dict, files: list[Path], allow_modified: bool = False) -> dict:
    """A dataset identity whose `file_sha256` are the hashes of the bytes eval reads, not the ones
    the manifest recorded at generation. A file whose bytes differ from its manifest entry stops
    the run (UserError) unless `allow_modified`; then the identity says which files were modified
    and its key changes, so the run is never taken for one on the generated data."""
    recorded = identity.get("file_sha256") or {}
    actual = {Path(f).name: file_sha256(f) for f in files}
    changed = sorted(name for name, digest in actual.items() if recorded.get(name) not in (None, digest))
    if changed and not allow_modified:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise UserError(
            f"{changed[0]}{more}: its bytes (sha256 {actual[changed[0]][:12]}) are not the ones its "
            f"manifest records ({recorded[changed[0]][:12]}); regenerate the data, or pass "
            "--allow-modified-data to evaluate these bytes (recorded as modified)"
        )
    checked = {**identity, "file_sha256": actual}
    if changed:
        checked["modified_files"] = changed
        checked["recorded_sha256"] = {name: recorded[name] for name in changed}
        digest = hashlib.sha256(json.dumps(actual, sort_keys=True).encode()).hexdigest()[:12]
        checked["key"] = f"{identity.get('key')}+modified-{digest}"
    return checked


def write_json(path: str | Path, data: dict) -> None:
    """Write atomically (temp file, fsync, os.replace) so a crash or a full disk never leaves half
    a run.json or manifest: the old file stays whole until the new one is, and no temp file is left."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # text with no UTF-8 form (a lone surrogate): kept, as JSON escapes
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: str | Path) -> dict:
    """A manifest or cache file (json_input.read_json: bounded, one line when malformed)."""
    return json_input.read_json(path)
