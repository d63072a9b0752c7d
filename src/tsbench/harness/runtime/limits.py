"""Resource bounds for one episode's kernel: rlimits, a throw-away uid, and a cgroup where one is writable.

The whole-episode memory bound, in order of preference:

* **cgroup v2** (a unified hierarchy whose own cgroup lets us create a child with the memory and
  pids controllers): one child cgroup per episode, `memory.max` = per-process memory + the disk
  quotas (tmpfs pages are charged to it), `memory.swap.max` = 0, `pids.max` = the task cap.
* **cgroup v1** (root hosts with writable `memory` and `pids` hierarchies, as on the machines this
  project runs on: their v2 tree carries no memory controller): the same limits in
  `memory.limit_in_bytes` (+ `memory.memsw.limit_in_bytes` where swap accounting exists) and
  `pids.max`.
* **rlimits only** (no writable cgroup): RLIMIT_AS per process (`memory_bytes`) and RLIMIT_NPROC
  (`max_tasks`, counted per uid: on root hosts every kernel runs as its own throw-away host uid, so
  the cap is the kernel's own). The bound is then `max_tasks x memory_bytes` of address space plus
  the tmpfs quotas, and memory held outside any address space (memfd or pipe buffers) is bounded
  only by RLIMIT_FSIZE per file and RLIMIT_NOFILE; `SandboxLimits.describe()` says which applies.

The rlimits are set in every case (a cgroup adds to them): RLIMIT_AS makes a large allocation fail
with MemoryError in the model's code instead of an out-of-memory kill.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# Throw-away uids: 2**30 + (pid << 8) + n stays below 2**31; n is one of 256 slots of this process.
FIRST_SANDBOX_UID = 2**30
UID_SLOTS = 256
_uid_counter = itertools.count()
_uid_lock = threading.Lock()
_live_uids: set[int] = set()  # handed out and not yet released: never handed out again meanwhile
_CGROUP_PREFIX = "tsbench-"


@dataclass(frozen=True)
class SandboxLimits:
    """The numbers one episode is held to (spec/harness.md, "Limits")."""

    memory_bytes: int = 4 * 2**30  # RLIMIT_AS per process
    max_tasks: int = 64  # RLIMIT_NPROC / pids.max: processes and threads
    file_bytes: int = 2**30  # RLIMIT_FSIZE: largest file
    work_bytes: int = 2**30  # tmpfs quota of the working directory
    tmp_bytes: int = 256 * 2**20  # tmpfs quota of /tmp and of /dev/shm (each)

    def episode_memory_bytes(self) -> int:
        """The cgroup bound: one process's memory plus every tmpfs filled to its quota."""
        return self.memory_bytes + self.work_bytes + 2 * self.tmp_bytes

    def rlimit_args(self, task_limit: int | None) -> list[str]:
        """`NAME=value` pairs for kernel_boot's launcher."""
        pairs = [f"as={self.memory_bytes}", f"fsize={self.file_bytes}", "core=0"]
        if task_limit is not None:
            pairs.append(f"nproc={task_limit}")
        return pairs


# ----------------------------------------------------------------------- uids and tasks --


def allocate_uid() -> int:
    """A host uid no account uses, unique to this process and to a live sandbox (root hosts only).

    The slots are taken round robin, skipping those still held: a counter alone repeated every 256
    sandboxes, and closing the older one (`kill_all_of_uid`) killed the newer one's kernel. Every uid
    handed out must be given back with `release_uid` once nothing runs as it."""
    base = FIRST_SANDBOX_UID + ((os.getpid() & 0x3FFFFF) << 8)
    with _uid_lock:
        for _ in range(UID_SLOTS):
            uid = base + next(_uid_counter) % UID_SLOTS
            if uid not in _live_uids:
                _live_uids.add(uid)
                return uid
    raise RuntimeError(f"all {UID_SLOTS} sandbox uids of this process are in use: fewer sandboxes at once")


def release_uid(uid: int | None) -> None:
    """Give back a uid from `allocate_uid` (its processes are gone); unknown uids are ignored."""
    if uid is not None:
        with _uid_lock:
            _live_uids.discard(uid)


def live_uids() -> frozenset[int]:
    """The uids handed out and not yet given back (for tests and diagnostics)."""
    with _uid_lock:
        return frozenset(_live_uids)


def tasks_of_uid(uid: int) -> list[tuple[int, int]]:
    """(pid, thread count) of every live (non-zombie) process whose real uid is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 ").split()[0]) != uid or fields.get("State", "").strip().startswith("Z"):
            continue
        found.append((int(entry), int(fields.get("Threads", "1"))))
    return found


def kill_all_of_uid(uid: int, attempts: int = 200) -> None:
    """SIGKILL every process of `uid` until none is left (forks may race the first pass)."""
    for _ in range(attempts):
        pids = [pid for pid, _threads in tasks_of_uid(uid)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    log.warning("processes of sandbox uid %d survived %d kill rounds", uid, attempts)


def task_limit_for(own_uid: bool, max_tasks: int) -> int | None:
    """RLIMIT_NPROC for a kernel: a fresh uid starts at zero tasks; a shared non-root uid gets
    headroom over what it already runs (older kernels count per uid, not per namespace). None when
    the kernel would run as host root, which the limit does not bind."""
    if own_uid:
        return max_tasks
    if os.geteuid() == 0:
        return None
    return sum(threads for _pid, threads in tasks_of_uid(os.getuid())) + max_tasks


# ---------------------------------------------------------------------------- cgroups --


class EpisodeCgroup:
    """One child cgroup per episode (v2, or v1 memory + pids), holding the jail's processes."""

    def __init__(self, version: int, directories: list[Path]) -> None:
        self.version = version
        self.directories = directories

    @classmethod
    def create(cls, name: str, limits: SandboxLimits) -> EpisodeCgroup | None:
        """The cgroup, or None where no writable hierarchy with a memory controller exists."""
        layout = _cgroup_layout()
        if layout is None:
            return None
        version, parents = layout
        made: list[Path] = []
        try:
            for parent in parents:
                directory = parent / f"{_CGROUP_PREFIX}{os.getpid()}-{name}"
                directory.mkdir()
                made.append(directory)
            group = cls(version, made)
            group._write_limits(limits)
            return group
        except OSError as exc:
            log.info("no episode cgroup (%s); rlimits only", exc)
            for directory in made:
                _rmdir_quietly(directory)
            return None

    def _write_limits(self, limits: SandboxLimits) -> None:
        memory = str(limits.episode_memory_bytes())
        if self.version == 2:
            (directory,) = self.directories
            (directory / "memory.max").write_text(memory)
            _write_if_present(directory / "memory.swap.max", "0")
            (directory / "pids.max").write_text(str(limits.max_tasks))
            return
        memory_dir, pids_dir = self.directories
        (memory_dir / "memory.limit_in_bytes").write_text(memory)
        _write_if_present(memory_dir / "memory.memsw.limit_in_bytes", memory)
        (pids_dir / "pids.max").write_text(str(limits.max_tasks))

    def add(self, pid: int) -> None:
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(str(pid))

    def describe(self) -> str:
        return f"cgroup v{self.version}"

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the directories once the processes in them are gone (they die with the jail)."""
        deadline = time.monotonic() + timeout_s
        for directory in self.directories:
            while not _rmdir_quietly(directory) and time.monotonic() < deadline:
                _kill_members(directory)
                time.sleep(0.02)


def sweep_cgroups() -> None:
    """Remove episode cgroups left by host processes that died (their name holds the host pid)."""
    layout = _cgroup_layout()
    if layout is None:
        return
    for parent in layout[1]:
        for directory in parent.glob(f"{_CGROUP_PREFIX}*"):
            try:
                host_pid = int(directory.name[len(_CGROUP_PREFIX) :].split("-", 1)[0])
                os.kill(host_pid, 0)
            except ProcessLookupError:
                _kill_members(directory)
                _rmdir_quietly(directory)
            except (ValueError, OSError):
                continue


@functools.lru_cache(maxsize=1)
def _cgroup_layout() -> tuple[int, list[Path]] | None:
    """(version, parent directories in which this process may create episode cgroups), probed once."""
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    unified = mounts.get("cgroup2")
    if unified is not None and "" in own:
        parent = unified / own[""].lstrip("/")
        controllers = _read_words(parent / "cgroup.subtree_control")
        if {"memory", "pids"} <= controllers and os.access(parent, os.W_OK):
            return 2, [parent]
    parents = []
    for controller in ("memory", "pids"):
        root = mounts.get(controller)
        if root is None or controller not in own:
            return None
        parent = root / own[controller].lstrip("/")
        if not os.access(parent, os.W_OK):
            return None
        parents.append(parent)
    return 1, parents


def _cgroup_mounts() -> dict[str, Path]:
    """Mount points by controller ("cgroup2" for the unified hierarchy)."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point, fs_type, options = Path(fields[4]), tail[0], tail[2].split(",")
        if fs_type == "cgroup2":
            found.setdefault("cgroup2", mount_point)
        elif fs_type == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    found.setdefault(controller, mount_point)
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path by controller ("" for v2)."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _write_if_present(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)


def _kill_members(directory: Path) -> None:
    try:
        pids = (directory / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _rmdir_quietly(directory: Path) -> bool:
    try:
        directory.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
