"""Pre-started jails, so that kernel start (bwrap, ipykernel, numpy and scipy imports) leaves an
episode's critical path.

A `JailPool` keeps up to `size` jails booted ahead: each is a `Sandbox` launched with no series and
its heavy imports done (WARM_MODULES), with an empty host file bound read-only where series.npz goes. When an
episode starts a `Sandbox` whose launch settings match, it takes one of them over (`claim`): the
host writes that episode's series into the bound file (by value, as before), fills context.json and
runs the usual boot cell; nothing of another episode is in it, because each pre-started jail serves
exactly one episode and is destroyed with it (`Sandbox.close`). A replacement is booted behind it.
A pre-started jail whose kernel died is thrown away and replaced. Sandboxes the pool cannot serve
(the unsafe mode, `files`) start cold, as without a pool; one with other bounds or read-only paths
starts cold and the pool pre-starts those from then on.

How many boot at once and how many are kept ahead: boots are CPU-bound (imports), so one per usable
core runs at a time, more only where boots are seen to wait for the CPU (their wall over their CPU,
`boot_workers`; on a quiet machine more only make every boot late). Claims are served in
arrival order, each with the kernel that will be ready first: a ready one, else the boot in flight
closest to done; a claim does not start a cold kernel beside the pool's boots (that is one more boot
sharing the same cores) unless the pool cannot serve it. Ready + booting is kept at the claims
waiting plus what the observed claim rate takes within one observed boot time (`target_jails`),
never more than `size` (the run's concurrency) nor the run's budget.

Why no fork server (a warm pre-imported kernel forking each episode's, issue 47): a jail is made when
bwrap execs, and a fork inherits its parent's. A child forked inside one jail would share its pid
namespace (same uid: it could signal its siblings), its /tmp and /dev/shm, its cgroup and its uid's
task limit; giving it fresh namespaces and mounts needs the capabilities the jail drops and the nested
user namespaces it refuses. Forking on the host side instead means redoing bwrap's setup in Python
(mounts, pivot_root, uid maps) in a process that imported with the host's privileges. Either would
weaken per-episode isolation, so each episode pays its own kernel start (~0.7 CPU-s, of which the jail
itself is ~5 %) and the pool hides it instead.

The pool in use is process-wide: `use_pool(pool)` (the thread executor does this for a run), or the
environment variable TSBENCH_JAIL_POOL=N, which makes one of size N on first use (the jail tests run
unchanged under it).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tsbench.harness.runtime.cleanup import release_event_loop, remove_abandoned_sandboxes
from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.kernel_boot import SERIES_FILE
from tsbench.harness.runtime.staging import write_series_npz

if TYPE_CHECKING:
    from tsbench.harness.runtime.sandbox import Sandbox

__all__ = ["ENV_VAR", "JailPool", "active_pool", "boot_workers", "claim_from_pool", "target_jails", "use_pool"]

log = logging.getLogger(__name__)

ENV_VAR = "TSBENCH_JAIL_POOL"
_CLAIM_WAIT_S = 120.0  # the longest a claim waits for a boot in flight
_FIRST_BOOT_GUESS_S = 3.0  # how long a pre-start takes until the pool has timed one
_MAX_BOOT_FAILURES = 3  # in a row: then the pool stops refilling and sandboxes start cold
# What a claimed sandbox takes over from the pre-started one: the jail, the kernel and its channels.
_RUNTIME_FIELDS = (
    "network_mode",
    "sandbox_uid",
    "task_limit",
    "cgroup",
    "workdir",
    "_root",
    "_ctl_dir",
    "_ipc_dir",
    "_context_path",
    "_jail",
    "_kernel_manager",
    "_client",
    "_refusals",
    "_reader",
    "_replied_to",
    "_kernel_log",
    "_launch_serial",
)
# Imported ahead in every pre-started jail: what every boot imports, and scipy.ndimage, which the kernel-side
# tools and the reference policies' first cell import (0.3-0.5 s on a loaded 2-core machine). Only sys.modules
# changes: the episode's namespace is still the boot's alone.
WARM_MODULES = ("numpy", "scipy", "scipy.ndimage")
_WARM_CELL = (
    "def _tsbench_warm():\n    import importlib\n"
    f"    for name in {WARM_MODULES!r}:\n        importlib.import_module(name)\n"
    "_tsbench_warm()\ndel _tsbench_warm\n"
)


def launch_key(box: Sandbox) -> tuple | None:
    """The settings fixed when a jail is launched (its bounds, its network, the read-only paths copied
    in), or None when the pool cannot serve this sandbox (the unsafe mode; `files`, which are the
    episode's own and enter the working directory before launch)."""
    if box.unsafe or box.files:
        return None
    limits = box.limits
    return (
        limits.memory_bytes,
        limits.max_tasks,
        limits.file_bytes,
        limits.work_bytes,
        limits.tmp_bytes,
        box.network,
        tuple(str(path) for path in box.readonly_paths),
    )


def _settings_of(key: tuple) -> dict[str, Any]:
    memory, tasks, file_bytes, work, tmp, network, readonly = key
    return {
        "memory_bytes": memory,
        "max_tasks": tasks,
        "file_bytes": file_bytes,
        "work_bytes": work,
        "tmp_bytes": tmp,
        "network": network,
        "readonly_paths": readonly,
    }


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def boot_workers(size: int, wall_per_cpu: float | None = None) -> int:
    """Boots to run side by side: enough to keep this process's cores busy booting, at most `size`. A
    boot is one busy interpreter, so one per core, unless boots are seen to take `wall_per_cpu` times
    their CPU (the cores shared with other work): then as many more as keep a core's worth busy each.
    On a quiet 2-core machine 8 boot threads gave only 1.10x the throughput of one (issue 47)."""
    stretch = 1.0 if wall_per_cpu is None else max(1.0, wall_per_cpu)
    return max(1, min(int(size), math.ceil(usable_cores() * stretch)))


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int] | None:
    """The children of `pid` from its threads' `children` files ([] once it is gone); None where the
    kernel keeps no such files."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in threads:
        try:
            found.extend(int(word) for word in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except FileNotFoundError:
            if Path(f"/proc/{pid}/task/{tid}").exists():
                return None
        except OSError:  # the thread ended meanwhile
            continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its descendants alive now (a jailed kernel lives under bwrap). Its
    descendants are found through /proc/<pid>/task/*/children (a few files, not every process of a busy
    machine: that scan cost each boot ~0.05 CPU-s, a quarter of the host's CPU per episode, issue 47)."""
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        stat = _proc_stat(current)
        if stat is None:
            continue
        total += stat[1]
        children = _children(current)
        if children is None:  # no children files here (CONFIG_PROC_CHILDREN off): one scan of /proc
            return _scanned_tree_cpu_seconds(pid)
        stack.extend(children)
    return total


def _scanned_tree_cpu_seconds(pid: int) -> float:
    """`tree_cpu_seconds` from every process's stat file."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
            parents[int(entry.name)], cpu[int(entry.name)] = stat
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        total += cpu.get(current, 0.0)
        stack.extend(child for child, parent in parents.items() if parent == current)
    return total


def target_jails(size: int, waiting: int, claims_per_s: float | None, boot_s: float) -> int:
    """Jails to hold ready or booting: every waiting claim gets one, plus those the claim rate will take
    within one boot time (Little's law), at most `size` and one per usable core beyond it (at
    concurrency 1 a boot longer than an episode needs the next one started before this one is taken);
    all `size` before any rate is seen (a run starts its episodes at once)."""
    ahead = size if claims_per_s is None else math.ceil(claims_per_s * boot_s) + 1
    return max(waiting, min(size + usable_cores(), ahead))


def _default_key() -> tuple:
    from tsbench.harness.runtime.sandbox import Sandbox

    return launch_key(Sandbox())


def prestart(key: tuple) -> Sandbox:
    """A jail launched and warmed with `key`'s settings, its series still to come."""
    from tsbench.harness.runtime.sandbox import Sandbox

    box = Sandbox(None, **_settings_of(key))
    box.deferred_series = True
    box.start()
    return box


def warm_kernel(box: Sandbox) -> None:
    """Import WARM_MODULES in a silent cell (no history, no names left behind)."""
    reply = box._client.execute_interactive(
        _WARM_CELL, silent=True, store_history=False, timeout=120, output_hook=lambda message: None
    )
    if reply["content"]["status"] != "ok":
        raise SandboxError(f"pre-started kernel failed to import {', '.join(WARM_MODULES)}")


def _alive(box: Sandbox) -> bool:
    manager = box._kernel_manager
    return manager is not None and manager.is_alive()


def hand_over(warm: Sandbox, box: Sandbox) -> None:
    """Move `warm`'s jail and kernel into `box`, give it `box`'s series and boot it for the episode."""
    if warm._cleanup is not None:
        _obj, func, args, kwargs = warm._cleanup.detach()
        box._cleanup = weakref.finalize(box, func, *args, **kwargs)
    warm._cleanup = None
    for name in _RUNTIME_FIELDS:
        setattr(box, name, getattr(warm, name))
    for name in ("cgroup", "_root", "_jail", "_kernel_manager", "_client", "_refusals", "_reader"):
        setattr(warm, name, None)
    try:
        input_dir = Path(box._root) / "input"
        with open(input_dir / SERIES_FILE, "wb") as handle:  # the inode the jail has bound, a channel at a time
            write_series_npz(handle, box.series)
        box._context_writer = threading.Thread(target=box._write_context_json, name="tsbench-context-json", daemon=True)
        box._context_writer.start()
        box._boot_kernel()
    except BaseException:
        box.close()
        raise


class JailPool:
    """Up to `size` pre-started jails of one launch key; see the module docstring."""

    def __init__(self, size: int, key: tuple | None = None, budget: int | None = None) -> None:
        if size < 1:
            raise ValueError("a jail pool holds at least one jail")
        self.size = int(size)
        # At most this many boots in all (a run's episode count): no jail is booted that no episode will take.
        self.budget = budget
        self.key = key or _default_key()
        self.stats: Counter[str] = Counter()  # warm (of them waited), cold, dead (replaced), failed boots
        self._ready: list[Sandbox] = []
        self._waiting: list[int] = []  # claims in arrival order, each waiting for the next ready jail
        self._tickets = 0
        self._last_claim: float | None = None
        self.claim_interval: float | None = None  # a running mean of the seconds between claims
        self._booting = 0
        self._boot_began: dict[int, float] = {}  # boots in flight: serial -> monotonic start
        self._serial = 0
        self.boot_seconds = _FIRST_BOOT_GUESS_S  # a running mean of how long a pre-start takes
        self.boot_wall_per_cpu: float | None = None  # a running mean of a pre-start's wall over its CPU
        self._failures = 0
        self._closed = False
        self._cond = threading.Condition()
        # one thread per possible boot; `_fill` starts only `workers` at a time
        self._boots = ThreadPoolExecutor(max_workers=self.size + usable_cores(), thread_name_prefix="jail")
        remove_abandoned_sandboxes(force=True)  # a pool serves one run: each run sweeps what dead hosts left
        with self._cond:
            self._fill()

    # ---- filling

    def _target(self) -> int:
        rate = None if self.claim_interval is None else 1.0 / max(self.claim_interval, 1e-3)
        return target_jails(self.size, len(self._waiting), rate, self.boot_seconds)

    def _can_boot(self) -> bool:
        """(Lock held.) Whether the pool may start another boot."""
        return (
            not self._closed
            and self._failures < _MAX_BOOT_FAILURES
            and (self.budget is None or self._serial < self.budget)
        )

    @property
    def workers(self) -> int:
        return boot_workers(self.size + usable_cores(), self.boot_wall_per_cpu)

    def _fill(self) -> None:
        """(Lock held.) Start boots until ready + booting reaches `_target()`, at most `workers` at once."""
        while self._can_boot() and len(self._ready) + self._booting < self._target() and self._booting < self.workers:
            self._booting += 1
            self._serial += 1
            self._boots.submit(self._boot_one, self.key, self._serial)

    def _boot_one(self, key: tuple, serial: int) -> None:
        with self._cond:
            self._boot_began[serial] = time.monotonic()
        box, cpu = None, None
        try:
            box = prestart(key)
            with contextlib.suppress(OSError, AttributeError, ValueError):  # the stretch is only a sizing hint
                cpu = tree_cpu_seconds(box._kernel_manager.provisioner.process.pid)
        except Exception as exc:  # a cold start will say the same in the episode
            log.warning("jail pool: pre-start failed: %s", exc)
        finally:
            release_event_loop()  # the boot thread's loop: the episode's thread drives the kernel from here
        with self._cond:
            self._booting -= 1
            took = time.monotonic() - self._boot_began.pop(serial)
            keep = box is not None and not self._closed and key == self.key
            if keep:
                self._ready.append(box)
                self._failures = 0
                self.boot_seconds = 0.7 * self.boot_seconds + 0.3 * took
                if cpu:
                    stretch, last = took / cpu, self.boot_wall_per_cpu
                    self.boot_wall_per_cpu = stretch if last is None else 0.7 * last + 0.3 * stretch
            elif box is None:
                self._failures += 1
                self.stats["failed"] += 1
            self._fill()  # the next boot, now that this one is done
            self._cond.notify_all()
        if box is not None and not keep:
            box.close()

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until `size` jails are ready (benchmarks and tests); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self._ready) < self.size and not self._closed and self._failures < _MAX_BOOT_FAILURES:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return len(self._ready) >= self.size

    @property
    def ready(self) -> int:
        with self._cond:
            return len(self._ready)

    # ---- serving

    def claim(self, box: Sandbox) -> bool:
        """Give `box` a pre-started jail (True), or leave it to start cold (False). Claims are served in
        arrival order; each waits for the next jail to be ready while the pool boots one for it."""
        key = launch_key(box)
        if key is None or self._closed:
            return False
        stale: list[Sandbox] = []
        warm = None
        with self._cond:
            self._note_claim()
            if key != self.key:  # the run asks for other bounds: pre-start those from now on
                stale, self._ready, self.key = self._ready, [], key
                self._fill()
            else:
                warm = self._wait_for_jail(stale)
                self._fill()
            self.stats["warm" if warm is not None else "cold"] += 1
        for old in stale:
            old.close()
        if warm is None:
            return False
        hand_over(warm, box)
        return True

    def _note_claim(self) -> None:
        """(Lock held.) Update the running mean of the seconds between claims."""
        now = time.monotonic()
        if self._last_claim is not None:
            gap = now - self._last_claim
            self.claim_interval = gap if self.claim_interval is None else 0.7 * self.claim_interval + 0.3 * gap
        self._last_claim = now

    def _wait_for_jail(self, stale: list[Sandbox]) -> Sandbox | None:
        """(Lock held.) The next live ready jail once every earlier claim has had its own; None when
        the pool can no longer serve (closed, failing, its budget spent) or after _CLAIM_WAIT_S."""
        self._tickets += 1
        ticket = self._tickets
        self._waiting.append(ticket)
        deadline = time.monotonic() + _CLAIM_WAIT_S
        waited = False
        try:
            while True:
                while self._ready and self._waiting[0] == ticket:
                    candidate = self._ready.pop(0)
                    if _alive(candidate):
                        self.stats["waited"] += waited
                        return candidate
                    stale.append(candidate)
                    self.stats["dead"] += 1
                self._fill()  # one boot per waiting claim (and replaces the dead)
                if self._closed or (not self._booting and not self._ready and not self._can_boot()):
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                waited = True
                self._cond.wait(min(remaining, 1.0))
        finally:
            self._waiting.remove(ticket)
            self._cond.notify_all()

    def close(self) -> None:
        """Stop refilling, wait for boots in flight, destroy every pre-started jail."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._boots.shutdown(wait=True, cancel_futures=True)  # boots not begun never start: no episode is left for them
        with self._cond:
            left, self._ready = self._ready, []
        for box in left:
            box.close()

    def __enter__(self) -> JailPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# ---------------------------------------------------------------- the pool in use --

_lock = threading.Lock()
_active: list[JailPool] = []  # a stack: use_pool() nests
_from_env: JailPool | None = None


@contextlib.contextmanager
def use_pool(pool: JailPool) -> Iterator[JailPool]:
    """Sandboxes started inside this block draw from `pool` (the caller closes it)."""
    with _lock:
        _active.append(pool)
    try:
        yield pool
    finally:
        with _lock:
            _active.remove(pool)


def active_pool() -> JailPool | None:
    """The innermost `use_pool` pool, else the TSBENCH_JAIL_POOL one (made on first use), else None."""
    global _from_env
    with _lock:
        if _active:
            return _active[-1]
        if _from_env is None:
            text = os.environ.get(ENV_VAR, "").strip()
            if not text or text == "0":
                return None
            try:
                size = int(text)
            except ValueError:
                raise SandboxError(f"{ENV_VAR} must be a whole number of jails, not {text!r}") from None
            if size < 1:
                return None
            _from_env = JailPool(size)
            atexit.register(_from_env.close)
        return _from_env


def claim_from_pool(box: Sandbox) -> bool:
    """Called by `Sandbox.start`: True when `box` now runs in a pre-started jail."""
    pool = active_pool()
    return pool is not None and pool.claim(box)
