"""stumpy's numba-compiled functions, compiled once per machine and copied into each kernel
(kernels cannot write the host's cache), so `discords` does not compile in every episode."""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

STUMPY_READY = "READY"
_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None
_WARM_CODE = """
import importlib, warnings
import numpy as np
import stumpy
from stumpy import cache
warnings.simplefilter("ignore")
for module_name, function_name in cache.get_njit_funcs():
    getattr(importlib.import_module(f"stumpy.{module_name}"), function_name).enable_caching()
stumpy.stump(np.random.default_rng(0).standard_normal(256), 16)
"""


@functools.lru_cache(maxsize=1)
def _stumpy_tag() -> str:
    """numba's cache is valid only for its own version and for the stumpy sources exactly as they are
    on disk: it keys entries by each source file's location and checks its mtime and size. So two
    virtualenvs never share a directory, nor does a venv recreated at the same path."""
    try:
        import hashlib
        from importlib.metadata import version
        from importlib.util import find_spec

        package = Path(find_spec("stumpy").origin).parent
        stamps = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in package.glob("*.py"))
        where = hashlib.sha256(repr((str(package), stamps)).encode()).hexdigest()[:10]
        return f"{version('stumpy')}-numba{version('numba')}-{where}"
    except Exception:  # stumpy missing: discords reports it when called
        return "none"


def stumpy_cache_dir() -> Path:
    """Where the host keeps stumpy's numba-compiled functions (kernels copy it; they cannot write it)."""
    from tsbench.models.local_hf import cache_root

    return cache_root() / "numba" / f"stumpy-{_stumpy_tag()}-py{sys.version_info.major}{sys.version_info.minor}"


def _readable_by_all(root: Path) -> None:
    """The jail's kernel runs as another uid: it must be able to read (never write) the cache."""
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def stumpy_cache_ready() -> bool:
    return (stumpy_cache_dir() / STUMPY_READY).is_file()


def warm_stumpy_cache(timeout_s: float = 900.0) -> bool:
    """Compile stumpy's matrix profile once per machine (about a minute) into stumpy_cache_dir(), in a
    child process. Without it, every episode's first `discords` call compiles from scratch."""
    from tsbench.models.local_hf import build_atomically

    target = stumpy_cache_dir()
    if (target / STUMPY_READY).is_file():
        return True

    def compile_into(staging: Path) -> None:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(staging))
        # stderr to a file this process closes at once: the warm-up outlives the eval that started it,
        # and must hold none of its descriptors meanwhile (no pipes)
        errors = staging / "warmup.log"
        with open(errors, "wb") as handle:
            child = subprocess.Popen(
                [sys.executable, "-c", _WARM_CODE],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=handle,
            )
        try:
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        if returncode != 0:
            raise OSError(errors.read_text(errors="replace")[-500:])
        errors.unlink()
        (staging / STUMPY_READY).write_text("ok\n")
        _readable_by_all(staging)

    try:
        build_atomically(target, compile_into, (target / STUMPY_READY).is_file)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("stumpy warm-up failed: %s", exc)
        return False


def warm_stumpy_cache_in_background() -> None:
    """Start warm_stumpy_cache() on a daemon thread once per process (no-op when the cache is ready
    or TSBENCH_STUMPY_WARMUP=0)."""
    global _warm_thread
    if os.environ.get("TSBENCH_STUMPY_WARMUP", "1") == "0" or stumpy_cache_ready():
        return
    with _warm_lock:
        if _warm_thread is None:
            _warm_thread = threading.Thread(target=warm_stumpy_cache, name="stumpy-warmup", daemon=True)
            _warm_thread.start()
