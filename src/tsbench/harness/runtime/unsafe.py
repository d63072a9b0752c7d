"""The weaker mode behind `--unsafe-sandbox`: for machines where bubblewrap cannot start.

Walls, from strongest to weakest:

* Network: the kernel's command starts with `unshare -n` (root) or `unshare -rn` (a user
  namespace), so it has no network interfaces ("netns"/"userns"). Where neither works, an audit
  hook in the kernel refuses non-unix socket connections ("guard").
* User (root hosts): the kernel runs as a throw-away uid keeping only CAP_DAC_READ_SEARCH, so it
  can read the interpreter wherever it lives, and therefore also everything else on the host:
  this mode does not keep gold files out of reach. RLIMIT_NPROC bounds its tasks; on close every
  process of that uid is killed.
* Files: audit hooks refuse writes outside the working directory and starting programs; they
  stop ordinary Python, not ctypes.

Like the jail, the launch command is built in host memory and the connection file lives where the
kernel cannot write, so a restart never runs anything the kernel wrote.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tsbench.harness.runtime.limits import allocate_uid, kill_all_of_uid, release_uid
from tsbench.harness.runtime.staging import KERNEL_OPTIONS, QUIET_ENV

# Passed through to the unsafe mode's kernel; everything else in the host environment stays behind.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH")

__all__ = ["can_drop_to_own_uid", "detect_network_isolation", "unsafe_command"]


@functools.lru_cache(maxsize=1)
def detect_network_isolation() -> str:
    """How this machine can cut a kernel off the network: "netns", "userns" or "guard".

    Probed once per process by running `true` under each candidate.
    """
    if shutil.which("unshare"):
        if os.geteuid() == 0 and _command_works(["unshare", "-n", "true"]):
            return "netns"
        if _command_works(["unshare", "-rn", "true"]):
            return "userns"
    return "guard"


@functools.lru_cache(maxsize=1)
def can_drop_to_own_uid() -> bool:
    """Whether kernels can run as a throw-away uid (root, and setpriv with ambient caps)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    uid = allocate_uid()
    try:
        return _command_works(_setpriv_prefix(uid) + ["true"])
    finally:
        kill_all_of_uid(uid)
        release_uid(uid)


def unsafe_command(
    python: str, boot_file: str, limits: list[str], kernel: list[str], *, uid: int | None, network_mode: str
) -> list[str]:
    """[unshare] python -I kernel_boot.py LIMITS -- [setpriv] KERNEL..."""
    if uid is not None:
        kernel = _setpriv_prefix(uid) + kernel
    argv = [python, "-I", boot_file, *limits, "--", *kernel]
    if network_mode == "netns":
        return ["unshare", "-n", "--", *argv]
    if network_mode == "userns":
        return ["unshare", "-rn", "--", *argv]
    return argv


def _setpriv_prefix(uid: int) -> list[str]:
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=+dac_read_search",
        "--ambient-caps=+dac_read_search",
        "--",
    ]


def _command_works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def unsafe_kernel_argv(connection_file: str) -> list[str]:
    """The ipykernel command the unsafe mode wraps in `unsafe_command`."""
    return [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *KERNEL_OPTIONS]


def unsafe_env(workdir: Path) -> dict[str, str]:
    """The unsafe kernel's environment: a few host variables, every scratch directory in `workdir`."""
    env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    scratch = str(workdir / ".ipython")
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir),
        MPLCONFIGDIR=str(workdir / ".matplotlib"),
        IPYTHONDIR=scratch,
        JUPYTER_CONFIG_DIR=scratch,
        JUPYTER_DATA_DIR=scratch,
        JUPYTER_RUNTIME_DIR=scratch,
        **QUIET_ENV,
    )
    return env
